"""check_policy and deploy_policy management commands."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from apps.policy.models import PolicyDeployment
from apps.policy.rules import policy_hash
from apps.policy.selectors import EMPTY_POLICY_HASH, policy_active
from tests.policy.test_policy_api import ALLOW_SEARCH, BLOCK_SEARCH, FLOOR_BYPASS


def _file(tmp_path: Path, text: str, name: str = "heso.toml") -> str:
    path = tmp_path / name
    path.write_bytes(text.encode())
    return str(path)


def test_check_policy_prints_ok_and_exits_zero(tmp_path, capsys) -> None:
    call_command("check_policy", _file(tmp_path, ALLOW_SEARCH))
    assert json.loads(capsys.readouterr().out) == {"result": "ok", "detail": None}


@pytest.mark.parametrize(
    ("text", "result"), [("[[rule]\n", "parse_error"), (FLOOR_BYPASS, "floor_bypass")]
)
def test_check_policy_reports_failures_and_exits_one(tmp_path, capsys, text, result) -> None:
    with pytest.raises(SystemExit) as exited:
        call_command("check_policy", _file(tmp_path, text))
    assert exited.value.code == 1
    out = json.loads(capsys.readouterr().out)
    assert out["result"] == result
    assert out["detail"]


def test_check_policy_refuses_a_missing_file(tmp_path) -> None:
    with pytest.raises(CommandError, match="cannot read"):
        call_command("check_policy", str(tmp_path / "absent.toml"))


def test_deploy_policy_activates_the_file_with_lf_line_endings(cast, tmp_path, capsys) -> None:
    text = "  " + ALLOW_SEARCH.replace("\n", "\r\n") + "\r\n"
    call_command("deploy_policy", "acme", _file(tmp_path, text))
    out = json.loads(capsys.readouterr().out)
    assert out["policy_hash"] == policy_hash("  " + ALLOW_SEARCH + "\n")
    assert out["rules"] == 1
    assert policy_active(org=cast.acme).toml == "  " + ALLOW_SEARCH + "\n"
    assert PolicyDeployment.objects.get(org=cast.acme).channel == "command"


def test_deploy_policy_checks_the_expected_hash(cast, tmp_path) -> None:
    call_command(
        "deploy_policy", "acme", _file(tmp_path, ALLOW_SEARCH), "--expected-hash", EMPTY_POLICY_HASH
    )
    with pytest.raises(CommandError, match="expected_policy_hash"):
        call_command(
            "deploy_policy", "acme", _file(tmp_path, BLOCK_SEARCH, "b.toml"),
            "--expected-hash", EMPTY_POLICY_HASH,
        )  # fmt: skip
    assert policy_active(org=cast.acme).toml == ALLOW_SEARCH


def test_deploy_policy_refuses_a_floor_bypass_and_an_unknown_org(cast, tmp_path) -> None:
    with pytest.raises(CommandError, match=r"pay\.allow"):
        call_command("deploy_policy", "acme", _file(tmp_path, FLOOR_BYPASS))
    with pytest.raises(CommandError, match="no org"):
        call_command("deploy_policy", "nope", _file(tmp_path, ALLOW_SEARCH))
