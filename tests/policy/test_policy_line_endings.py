"""One policy text, one version, whatever line endings it arrived with.

A browser's form sends its lines CRLF-terminated; a file may have CRLF or lone CR line ends.
Every entry (the console's deploy and preview, ``POST /v1/policy`` and its preview,
``deploy_policy``, ``check_policy``) normalises them to LF before validating and hashing, so
the policy_hash is BLAKE3 of the text as deployed and served.
"""

from __future__ import annotations

import json
from http import HTTPStatus
from pathlib import Path

from django.conf import settings
from django.core.management import call_command
from django.test import Client

from apps.policy.models import PolicyDeployment, PolicyVersion
from apps.policy.rules import policy_hash, policy_id
from apps.policy.selectors import policy_active
from apps.policy.services import policy_text_normalize
from tests.policy.test_policy_api import ALLOW_SEARCH, BLOCK_SEARCH, sdk

EXAMPLE_POLICY = Path(settings.BASE_DIR) / "deploy" / "examples" / "policy.toml"


def crlf(text: str) -> str:
    return text.replace("\n", "\r\n")


def lone_cr(text: str) -> str:
    return text.replace("\n", "\r")


def console(username: str) -> Client:
    client = Client()
    assert client.login(username=username, password=f"pw-{username.split('-')[1]}")
    return client


def test_normalising_turns_crlf_and_lone_cr_into_lf_and_nothing_else() -> None:
    assert policy_text_normalize("a\r\nb\rc\n\r\n  \n") == "a\nb\nc\n\n  \n"
    assert policy_text_normalize("\ufeffx = 1\r\n") == "\ufeffx = 1\n"  # a BOM stays


def test_the_example_deployed_by_command_then_unchanged_from_the_console_is_one_version(
    cast, tmp_path, capsys
) -> None:
    text = EXAMPLE_POLICY.read_bytes().decode("utf-8")
    assert "\r" not in text
    call_command("deploy_policy", "acme", str(EXAMPLE_POLICY))
    by_command = json.loads(capsys.readouterr().out)

    # The console's form posts the textarea's value with CRLF line ends, as browsers do.
    answer = console("acme-manager").post(
        "/admin/policy/policyversion/add/", {"org": cast.acme.pk, "toml": crlf(text)}
    )

    assert answer.status_code == HTTPStatus.FOUND
    active = policy_active(org=cast.acme)
    assert active.policy_id == by_command["policy_id"] == policy_id(text)
    assert PolicyVersion.objects.filter(org=cast.acme).count() == 1
    assert PolicyDeployment.objects.filter(org=cast.acme).count() == 1
    pulled = sdk(cast.acme_policy_only_key.secret).get("/v1/policy/pull").json()
    assert pulled["toml"] == text
    assert "\r" not in pulled["toml"]
    assert pulled["policy_hash"] == policy_hash(pulled["toml"])


def test_a_console_deploy_stores_lf(cast) -> None:
    console("acme-manager").post(
        "/admin/policy/policyversion/add/", {"org": cast.acme.pk, "toml": crlf(ALLOW_SEARCH)}
    )
    assert policy_active(org=cast.acme).toml == ALLOW_SEARCH


def test_the_api_deploy_stores_and_hashes_lf(cast, dashboard) -> None:
    client = dashboard("manager")
    first = client.post("/v1/policy", {"toml": crlf(ALLOW_SEARCH)}, format="json").json()
    again = client.post("/v1/policy", {"toml": lone_cr(ALLOW_SEARCH)}, format="json").json()
    plain = client.post("/v1/policy", {"toml": ALLOW_SEARCH}, format="json").json()

    assert first["toml"] == ALLOW_SEARCH
    assert first["policy_hash"] == policy_hash(ALLOW_SEARCH)
    assert first["policy_id"] == again["policy_id"] == plain["policy_id"]
    assert PolicyVersion.objects.filter(org=cast.acme).count() == 1


def test_the_deploy_command_stores_lf(cast, tmp_path, capsys) -> None:
    path = tmp_path / "heso.toml"
    path.write_bytes(crlf(ALLOW_SEARCH).encode())
    call_command("deploy_policy", "acme", str(path))
    assert json.loads(capsys.readouterr().out)["policy_hash"] == policy_hash(ALLOW_SEARCH)
    assert policy_active(org=cast.acme).toml == ALLOW_SEARCH


def test_check_policy_reads_a_lone_cr_file_as_the_deploy_would(tmp_path, capsys) -> None:
    path = tmp_path / "heso.toml"
    path.write_bytes(lone_cr(ALLOW_SEARCH).encode())
    call_command("check_policy", str(path))
    assert json.loads(capsys.readouterr().out)["result"] == "ok"


def test_the_previews_read_drafts_as_the_deploy_would(cast, dashboard) -> None:
    api = dashboard("manager").post(
        "/v1/policy/preview", {"toml": lone_cr(BLOCK_SEARCH)}, format="json"
    )
    assert api.status_code == HTTPStatus.OK, api.content
    page = console("acme-manager").post(
        "/admin/policy/policyversion/preview/",
        {"org": cast.acme.pk, "toml": lone_cr(BLOCK_SEARCH), "days": 7},
    )
    assert page.status_code == HTTPStatus.OK
    assert "decisions would change" in page.content.decode()
    assert policy_active(org=cast.acme).is_fail_safe
