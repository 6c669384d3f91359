"""`make run`'s bootstrap (apps.console.demo): what it seeds and prints; idempotent."""

from __future__ import annotations

import json
import socket
import stat
from io import StringIO
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError
from rest_framework.test import APIClient

from apps.approvals.models import Approval, ApproverKey
from apps.policy.admin import PolicyDeployForm
from apps.policy.models import PolicyHead
from apps.policy.services import policy_validate
from apps.receipts.models import MirrorEntry
from apps.tenancy.models import ApiKey, Membership, Org
from apps.tenancy.services import api_key_authenticate, org_create

pytestmark = pytest.mark.django_db

EXAMPLE_POLICY = Path(settings.BASE_DIR) / "deploy" / "examples" / "policy.toml"


def bootstrap(state_dir: Path, *args: str) -> list[str]:
    out = StringIO()
    call_command("bootstrap_demo", "--state-dir", str(state_dir), *args, stdout=out)
    return out.getvalue().splitlines()


def value(lines: list[str], label: str) -> str:
    return next(line for line in lines if line.startswith(label)).split(":", 1)[1].strip()


def demo_state() -> dict[str, object]:
    org = Org.objects.get(slug="demo")
    return {
        "api_keys": ApiKey.objects.filter(org=org).count(),
        "users": get_user_model().objects.filter(username="demo").count(),
        "memberships": Membership.objects.filter(org=org).count(),
        "approver_keys": ApproverKey.objects.filter(org=org).count(),
        "receipts": MirrorEntry.objects.filter(org=org).count(),
        "approvals": list(Approval.objects.filter(org=org).values_list("status", flat=True)),
        "password_hash": get_user_model().objects.get(username="demo").password,
    }


def test_bootstrap_twice_keeps_one_key_one_login_and_the_same_data(tmp_path):
    first = bootstrap(tmp_path)
    before = demo_state()
    second = bootstrap(tmp_path)
    after = demo_state()

    assert before == after  # nothing duplicated, the password (hash) not reset
    assert after["api_keys"] == 1
    assert after["users"] == 1
    assert after["memberships"] == 1
    assert after["approver_keys"] == 1
    assert after["receipts"] == 12
    assert after["approvals"] == ["pending"]
    assert value(first, "API key:") == value(second, "API key:")
    assert value(first, "console login:") == value(second, "console login:")
    username, password = value(second, "console login:").split(" / ")
    assert get_user_model().objects.get(username=username).check_password(password)
    assert api_key_authenticate(presented=value(second, "API key:")) is not None


def test_the_demo_has_the_example_policy_active_and_a_registered_approver_key(tmp_path):
    bootstrap(tmp_path)
    org = Org.objects.get(slug="demo")
    head = PolicyHead.objects.select_related("version").get(org=org)
    assert head.version is not None
    assert head.version.toml == EXAMPLE_POLICY.read_text()
    key = ApproverKey.objects.get(org=org)
    assert key.revoked_at is None
    assert "demo" in key.label.lower()
    kinds = {
        json.loads(text)["content"]["action"]["verb"]
        for text in MirrorEntry.objects.filter(org=org).values_list("receipt", flat=True)
    }
    assert {"tool_call", "llm_call", "payment"} <= kinds


def test_secrets_live_in_a_private_file_and_are_reissued_only_when_it_is_gone(tmp_path):
    first = bootstrap(tmp_path)
    state_file = tmp_path / "demo.json"
    assert stat.S_IMODE(state_file.stat().st_mode) == 0o600
    assert json.loads(state_file.read_text())["api_key"] == value(first, "API key:")
    state_file.unlink()
    again = bootstrap(tmp_path)
    assert value(again, "API key:") != value(first, "API key:")
    assert Approval.objects.filter(org__slug="demo").count() == 1
    assert MirrorEntry.objects.filter(org__slug="demo").count() == 12


def test_it_prints_the_curl_the_sdk_lines_and_the_urls(tmp_path):
    lines = bootstrap(tmp_path, "--bind", "127.0.0.1:0")
    text = "\n".join(lines)
    secret = value(lines, "API key:")
    base = "http://127.0.0.1:0"
    assert f"curl -sS -X POST {base}/v1/receipts" in text
    assert f"Authorization: Bearer {secret}" in text
    assert f'heso.cloud.configure(api_key="{secret}", endpoint="{base}")' in text
    assert f"export HESO_CONSOLE_URL={base}" in text
    for url in ("/admin/", "/v1/docs", "/verify", "/approve/"):
        assert f"{base}{url}" in text
    assert "DEMO ONLY" in text
    assert value([line.strip() for line in lines], "private seed:")
    assert "Countersign" in text


def test_the_printed_curl_pushes_a_real_receipt(tmp_path):
    lines = bootstrap(tmp_path)
    body = (tmp_path / "first-receipt.json").read_bytes()
    assert f"--data-binary @{tmp_path / 'first-receipt.json'}" in "\n".join(lines)
    client = APIClient()
    answer = client.post(
        "/v1/receipts",
        data=body,
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {value(lines, 'API key:')}",
    )
    assert answer.status_code == 201, answer.content
    assert answer.json()["status"] == "appended"


def test_a_busy_port_is_refused_before_anything_is_printed(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        out = StringIO()
        with pytest.raises(CommandError, match=f"127.0.0.1:{port} is not available"):
            call_command(
                "bootstrap_demo", "--state-dir", str(tmp_path), "--bind", f"127.0.0.1:{port}",
                stdout=out,
            )  # fmt: skip
    assert out.getvalue() == ""
    assert not Org.objects.filter(slug="demo").exists()


def test_a_port_whose_stopped_server_left_a_client_connection_open_is_free(tmp_path):
    """`make run` stopped while a browser tab keeps its connection: the server's side of
    that connection stays on the port (FIN_WAIT_2) after the listener is gone. The server
    would bind it again (it sets SO_REUSEADDR), so the probe must not refuse it."""
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the dev server does
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    with socket.create_connection(("127.0.0.1", port)) as browser:
        served, _ = server.accept()
        server.close()  # Ctrl-C: the listener goes, the process closes its connection...
        served.close()  # ...which waits in FIN_WAIT_2 for the browser, who keeps it open
        assert browser.recv(1) == b""  # the browser has seen the server's FIN

        lines = bootstrap(tmp_path, "--bind", f"127.0.0.1:{port}")

    assert f"console:        http://127.0.0.1:{port}/admin/" in lines
    assert Org.objects.filter(slug="demo").exists()


def test_a_port_with_a_live_listener_is_refused_before_migrating(tmp_path):
    with socket.socket() as busy:
        busy.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # even a reusing listener
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        out = StringIO()
        with pytest.raises(CommandError, match=f"127.0.0.1:{port} is not available"):
            call_command(
                "bootstrap_demo", "--state-dir", str(tmp_path), "--bind", f"127.0.0.1:{port}",
                "--migrate", stdout=out,
            )  # fmt: skip
    assert out.getvalue() == ""  # migrate prints its plan first: it never ran
    assert not Org.objects.filter(slug="demo").exists()


def test_a_non_demo_org_is_never_touched(tmp_path):
    mine = org_create(slug="demo", name="Mine")
    with pytest.raises(CommandError, match="not the demo org"):
        bootstrap(tmp_path)
    assert not ApiKey.objects.filter(org=mine).exists()
    assert not MirrorEntry.objects.filter(org=mine).exists()
    assert not (tmp_path / "demo.json").exists()


def test_other_orgs_are_left_alone(cast, tmp_path):
    receipts_before = MirrorEntry.objects.exclude(org__slug="demo").count()
    keys_before = ApiKey.objects.exclude(org__slug="demo").count()
    bootstrap(tmp_path)
    assert MirrorEntry.objects.exclude(org__slug="demo").count() == receipts_before
    assert ApiKey.objects.exclude(org__slug="demo").count() == keys_before


def test_bootstrap_prints_the_console_url_it_was_given(tmp_path):
    lines = bootstrap(tmp_path, "--console-url", "http://127.0.0.1:8777/admin/")
    assert "console:        http://127.0.0.1:8777/admin/" in lines


def test_the_example_policy_passes_check_policy_and_starts_the_deploy_form():
    out = StringIO()
    call_command("check_policy", str(EXAMPLE_POLICY), stdout=out)
    assert json.loads(out.getvalue()) == {"result": "ok", "detail": None}
    assert policy_validate(toml=EXAMPLE_POLICY.read_text()).rules
    initial = PolicyDeployForm().fields["toml"].initial
    assert (initial() if callable(initial) else initial) == EXAMPLE_POLICY.read_text()


def test_the_root_leads_to_the_console(client):
    answer = client.get("/")
    assert answer.status_code == 302
    assert answer["Location"] == "/admin/"
