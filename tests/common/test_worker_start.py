"""What a web worker loads when it starts (``import config.wsgi``, as gunicorn does), in a
process of its own.

The console's single sign-on pages are part of both URL confs, so every worker loads
them; the OpenID Connect backend they lead to imports PyJWT and with it cryptography's
bindings, about 7 MB of each worker's memory (docs/performance/receipts.md). A worker
that serves only SDK pushes never signs anyone in: the backend is loaded by a sign-in.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

from tests.child_env import child_environment

BASE_DIR = Path(settings.BASE_DIR)
SIGN_IN_ONLY = ("jwt", "cryptography.hazmat.bindings._rust", "mozilla_django_oidc.auth")

REPORT = """
import json, sys
import config.wsgi
started = {name: name in sys.modules for name in NAMES}
from django.contrib.auth import get_backends
get_backends()
print(json.dumps({"started": started, "backends": {name: name in sys.modules for name in NAMES}}))
"""


def loaded(profile: str, tmp_path: Path) -> dict[str, dict[str, bool]]:
    """Which of SIGN_IN_ONLY a worker of ``profile`` has loaded once started, and once
    Django has loaded the authentication backends (as a sign-in does)."""
    env = child_environment("DATABASE_URL", "MIGRATION_DATABASE_URL", "DEBUG")
    env.update(
        DJANGO_SETTINGS_MODULE="config.settings.production",
        DJANGO_SECRET_KEY="s" * 60,
        DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}",
        ALLOWED_HOSTS="mirror.example.com",
        API_PROFILE=profile,
    )
    code = REPORT.replace("NAMES", repr(SIGN_IN_ONLY))
    result = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", code],
        cwd=BASE_DIR, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    report: dict[str, dict[str, bool]] = json.loads(result.stdout.strip().splitlines()[-1])
    return report


@pytest.mark.parametrize("profile", ["keyscoped", "teampath"])
def test_a_worker_starts_without_the_sign_in_backend(profile, tmp_path):
    report = loaded(profile, tmp_path)
    assert report["started"] == dict.fromkeys(SIGN_IN_ONLY, False)
    # What a sign-in loads (Django tries each backend in turn) is the backend's.
    assert report["backends"] == dict.fromkeys(SIGN_IN_ONLY, True)
