"""``python -m tests.oidc_provider.serve``: migrate the provider's SQLite database and serve
it on 127.0.0.1:$OIDC_PROVIDER_PORT until stopped (tests/oidc_provider/running.py)."""

from __future__ import annotations

import os


def main() -> None:
    os.environ["DJANGO_SETTINGS_MODULE"] = "tests.oidc_provider.settings"
    import django

    django.setup()
    from django.core.handlers.wsgi import WSGIHandler
    from django.core.management import call_command
    from django.core.servers.basehttp import run

    from tests.oidc_provider import settings

    call_command("migrate", verbosity=0, interactive=False)
    run("127.0.0.1", settings.PORT, WSGIHandler(), threading=True)


if __name__ == "__main__":
    main()
