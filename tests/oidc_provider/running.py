"""The test provider as a pytest fixture: started once per test session as its own process
on a free port of 127.0.0.1 (environment from tests/child_env.py), stopped at the end;
and the person's side of a sign-in at it (signing in at the provider's page)."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urljoin, urlsplit

import pytest
import requests

from tests.child_env import child_environment, free_port, serving

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "provider-pw-1"


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
    port = free_port()
    secret = secrets.token_hex(16)
    issuer = f"http://127.0.0.1:{port}/o"
    with tempfile.TemporaryDirectory(prefix="oidc-provider-") as home:
        env = child_environment("DJANGO_SETTINGS_MODULE", "DATABASE_URL", "MIGRATION_DATABASE_URL")
        env.update(
            OIDC_PROVIDER_PORT=str(port),
            OIDC_PROVIDER_DB=os.path.join(home, "provider.sqlite3"),
            OIDC_PROVIDER_SETUP_SECRET=secret,
            PYTHONPATH=str(ROOT),
        )
        with serving(
            [sys.executable, "-m", "tests.oidc_provider.serve"],
            env=env, cwd=ROOT, log=Path(home, "provider.log"),
            # migrating SQLite and generating an RSA key take a while
            ready=lambda: requests.get(f"{issuer}/.well-known/openid-configuration", timeout=2).ok,
        ) as process:  # fmt: skip
            yield Provider(issuer=issuer, setup_secret=secret, process=process)
