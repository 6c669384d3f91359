"""Container healthcheck: GET /readyz on the local gunicorn; exit 0 only on 200.

The slim image has no curl. The request carries a Host the settings allow (the first
ALLOWED_HOSTS entry), since Django refuses any other; /readyz is exempt from the HTTPS
redirect (config/settings/production.py), so plain HTTP to gunicorn is enough.
"""

from __future__ import annotations

import http.client
import os
import sys


def allowed_host() -> str:
    for entry in os.environ.get("ALLOWED_HOSTS", "").split(","):
        host = entry.strip().lstrip(".")
        if host and host != "*":
            return host
    return "localhost"


def main() -> int:
    bind = os.environ.get("GUNICORN_BIND", "127.0.0.1:8000")
    port = int(bind.rsplit(":", 1)[-1])
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        connection.request("GET", "/readyz", headers={"Host": allowed_host()})
        status = connection.getresponse().status
    except OSError as error:
        print(f"readyz: {error}", file=sys.stderr)
        return 1
    finally:
        connection.close()
    return 0 if status == 200 else 1


if __name__ == "__main__":
    sys.exit(main())
