"""The test provider as a pytest fixture: started once per test session as its own process
on a free port of 127.0.0.1 (environment from tests/child_env.py), stopped at the end;
and the person's side of a sign-in at it (signing in at the provider's page)."""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urljoin, urlsplit

import pytest
import requests

from tests.child_env import child_environment

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "provider-pw-1"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Provider:
    issuer: str
    setup_secret: str
    process: subprocess.Popen[bytes]

    def set_up(
        self, *, users: list[dict[str, Any]] | None = None,
        clients: list[dict[str, Any]] | None = None,
    ) -> None:  # fmt: skip
        """Create or update people (``username``, ``email``, ``groups``) and clients
        (``client_id``, ``client_secret``, ``redirect_uris``, ``name``) at the provider."""
        people = [{"password": PASSWORD, **user} for user in users or []]
        answer = requests.post(
            self.issuer.removesuffix("/o") + "/test/setup",
            json={"users": people, "clients": clients or []},
            headers={"X-Setup-Secret": self.setup_secret},
            timeout=30,
        )
        answer.raise_for_status()

    def authorize(self, authorize_url: str, username: str) -> str:
        """Sign ``username`` in at the provider's own page and follow the authorization
        request: the URL the provider sends the browser back to (the relying party's
        callback, with the code and the state)."""
        browser = requests.Session()
        answer = browser.get(authorize_url, allow_redirects=False, timeout=30)
        assert answer.status_code == 302, answer.text
        login_url = urljoin(authorize_url, answer.headers["Location"])
        page = browser.get(login_url, timeout=30)
        token = browser.cookies["csrftoken"]
        [next_url] = parse_qs(urlsplit(login_url).query)["next"]
        answer = browser.post(
            login_url,
            data={"username": username, "password": PASSWORD, "next": next_url,
                  "csrfmiddlewaretoken": token},
            headers={"Referer": login_url},
            allow_redirects=False,
            timeout=30,
        )  # fmt: skip
        assert answer.status_code == 302, page.text
        authorize_again = urljoin(login_url, answer.headers["Location"])
        answer = browser.get(authorize_again, allow_redirects=False, timeout=30)
        assert answer.status_code == 302, answer.text
        return str(answer.headers["Location"])


@pytest.fixture(scope="session")
def oidc_provider() -> Iterator[Provider]:
    port = _free_port()
    secret = secrets.token_hex(16)
    with tempfile.TemporaryDirectory(prefix="oidc-provider-") as home:
        env = child_environment("DJANGO_SETTINGS_MODULE", "DATABASE_URL", "MIGRATION_DATABASE_URL")
        env.update(
            OIDC_PROVIDER_PORT=str(port),
            OIDC_PROVIDER_DB=os.path.join(home, "provider.sqlite3"),
            OIDC_PROVIDER_SETUP_SECRET=secret,
            PYTHONPATH=str(ROOT),
        )
        log = open(os.path.join(home, "provider.log"), "wb")  # noqa: SIM115 (closed below)
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.oidc_provider.serve"],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        issuer = f"http://127.0.0.1:{port}/o"
        try:
            deadline = time.monotonic() + 60  # migrating SQLite and generating an RSA key
            while True:
                if process.poll() is not None:
                    log.flush()
                    raise RuntimeError(Path(home, "provider.log").read_text())
                try:
                    if requests.get(f"{issuer}/.well-known/openid-configuration", timeout=2).ok:
                        break
                except requests.ConnectionError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError("the test provider did not start")
                time.sleep(0.2)
            yield Provider(issuer=issuer, setup_secret=secret, process=process)
        finally:
            process.terminate()
            process.wait(timeout=30)
            log.close()
