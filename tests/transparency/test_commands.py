"""The log's management commands (transparency.md §9)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from nacl.signing import SigningKey

from apps.transparency.tree import note
from tests.transparency.factories import mirror

VECTORS = json.loads(
    (Path(__file__).resolve().parents[1] / "data" / "vectors" / "transparency.json").read_text()
)


def run(*args: str, stdin: str | None = None, monkeypatch: Any = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command(*args, stdout=out, stderr=err)
        code = 0
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    return code, out.getvalue(), err.getvalue()


def test_verify_transparency_jsonl_agrees_with_every_verify_vector(tmp_path: Path) -> None:
    cases = [case for case in VECTORS["cases"] if case["op"].startswith("verify_")]
    lines = [json.dumps({"op": case["op"], **case["inputs"]}) for case in cases]
    source = tmp_path / "cases.jsonl"
    source.write_text("\n".join([*lines, "[]", '{"op": "nope"}']) + "\n")
    code, out, _ = run("verify_transparency", "--jsonl", str(source))
    verdicts = [json.loads(line) for line in out.splitlines()]
    assert len(verdicts) == len(cases) + 2
    for case, verdict in zip(cases, verdicts, strict=False):
        assert verdict["valid"] is case["expected"]["valid"], case["name"]
        if case["op"] == "verify_proof" and not verdict["valid"]:
            assert verdict["reason"] == case["expected"]["reason"], case["name"]
    assert verdicts[-2]["reason"] == verdicts[-1]["reason"] == "bad_input"
    assert code == 1


def test_verify_transparency_needs_a_proof_in_the_receipt(tmp_path: Path) -> None:
    receipt = tmp_path / "r.json"
    receipt.write_text(json.dumps({"content": {"a": 1}}))
    code, out, _ = run("verify_transparency", str(receipt), "--origin", "o", "--required", "0")
    assert code == 1
    assert json.loads(out)["valid"] is False


@pytest.mark.django_db
def test_register_witness_statuses_and_refusals() -> None:
    key = bytes(SigningKey(bytes(32)).verify_key)
    raw = note.b64(key)
    code, out, _ = run("register_witness", "w.example", raw)
    assert code == 0
    shown = json.loads(out)
    assert shown == {
        "name": "w.example",
        "key_id": note.key_id("w.example", key).hex(),
        "vkey": note.vkey_of("w.example", key),
        "status": "registered",
    }
    assert json.loads(run("register_witness", "w.example", shown["vkey"])[1])["status"] == (
        "unchanged"
    )
    code, out, _ = run("register_witness", "w.example", raw, "--deactivate")
    assert json.loads(out)["status"] == "deactivated"
    for name, given in (
        ("w.example", note.vkey_of("other.example", key)),
        ("bad name", raw),
        ("a+b", raw),
        ("localhost/v1/log", raw),
        ("w.example", "AAAA"),
    ):
        code, out, err = run("register_witness", name, given)
        assert (code, out) == (1, ""), name
        assert err, name


@pytest.mark.django_db
def test_publish_checkpoint_prints_one_json_line(cast) -> None:
    assert json.loads(run("publish_checkpoint")[1]) == {
        "published": False,
        "epoch": None,
        "size": 0,
        "leaves": 0,
        "root": None,
    }
    mirror(cast.acme, ["ab" * 32])
    published = json.loads(run("publish_checkpoint")[1])
    assert published["published"] is True
    assert published["epoch"] == 1
    again = json.loads(run("publish_checkpoint")[1])
    assert again == {**published, "published": False, "leaves": 0}


@pytest.mark.django_db
def test_publish_checkpoint_refuses_a_changed_origin(cast, settings) -> None:
    mirror(cast.acme, ["ab" * 32])
    run("publish_checkpoint")
    settings.TRANSPARENCY_ORIGIN = "elsewhere.example/v1/log"
    code, _out, err = run("publish_checkpoint")
    assert code == 1
    assert "differs" in err


def test_periodic_publication_off_exits_at_once(settings) -> None:
    settings.TRANSPARENCY_EPOCH_SECONDS = 0
    code, out, _ = run("publish_checkpoint", "--periodic")
    assert code == 0
    assert "off" in out
