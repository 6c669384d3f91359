"""End to end on a live server: receipts pushed into several orgs, epochs published, two
witnesses cosigning over HTTP, proofs verified offline, and a tampered node caught by both
``monitor_log`` and ``verify_transparency``."""

from __future__ import annotations

import io
import json
from http import HTTPStatus
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.db import DatabaseError, transaction

from apps.transparency.client import LogClient, urllib_transport
from apps.transparency.models import OrgLog, OrgTreeNode, TopNode
from apps.transparency.tree import merkle
from tests.receipts.factories import Agent

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]

ORIGIN = "localhost/v1/log"


def run(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command(*args, stdout=out, stderr=err)
        code = 0
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    return code, out.getvalue(), err.getvalue()


def push_many(push: Any, count: int) -> list[dict[str, Any]]:
    agent = Agent()
    receipts = [agent.receipt() for _ in range(count)]
    for receipt in receipts:
        assert push(receipt).status_code == HTTPStatus.CREATED
    return receipts


def test_the_log_end_to_end(cast, push, globex_push, live_server, tmp_path: Path) -> None:
    url = live_server.url
    witnesses = {}
    for name in ("w1.example", "w2.example"):
        code, out, _ = run("witness", "keygen", name, str(tmp_path / f"{name}.key"))
        vkey = json.loads(out)["vkey"]
        code, out, _ = run("register_witness", name, vkey)
        assert code == 0
        assert json.loads(out)["status"] == "registered"
        witnesses[name] = vkey

    def witness_round() -> None:
        for name in witnesses:
            code, out, err = run(
                "witness",
                "run",
                "--log",
                url,
                "--origin",
                ORIGIN,
                "--name",
                name,
                "--key-file",
                str(tmp_path / f"{name}.key"),
                "--state-file",
                str(tmp_path / f"{name}.state"),
            )
            assert code == 0, err
            assert json.loads(out)["action"] == "cosigned"
            assert json.loads(out)["status"] == HTTPStatus.CREATED

    def monitor() -> tuple[int, dict[str, Any]]:
        code, out, _ = run(
            "monitor_log",
            "--log",
            url,
            "--origin",
            ORIGIN,
            "--state-file",
            str(tmp_path / "monitor.state"),
        )
        return code, json.loads(out.splitlines()[0])

    acme = push_many(push, 3)
    push_many(globex_push, 1)
    code, out, _ = run("publish_checkpoint")
    assert json.loads(out) == {**json.loads(out), "published": True, "epoch": 1, "size": 2}
    witness_round()
    assert monitor() == (0, {"size": 2, "new_leaves": 2, "alerts": []})

    acme += push_many(push, 2)
    push_many(globex_push, 1)
    assert json.loads(run("publish_checkpoint")[1])["epoch"] == 2
    witness_round()
    assert monitor() == (0, {"size": 4, "new_leaves": 2, "alerts": []})

    # A proof fetched over HTTP verifies with the repository's verifier, two of two witnesses.
    client = LogClient(base_url=url, transport=urllib_transport())
    note = client.checkpoint() or ""
    assert note.count("\n— ") == 2
    receipt = acme[4]
    proof = fetch_proof(url, cast.acme_key.secret, receipt["content"]["action_hash"])
    receipt_file = tmp_path / "receipt.json"
    receipt_file.write_text(json.dumps({**receipt, "transparency": [proof]}))
    verify_args = (
        "verify_transparency",
        str(receipt_file),
        "--origin",
        ORIGIN,
        "--witness-key",
        *witnesses.values(),
        "--required",
        "2",
    )
    code, out, _ = run(*verify_args)
    assert code == 0
    assert json.loads(out)["valid"] is True

    # Tamper with a stored node that both the next org consistency proof and a receipt's
    # inclusion proof read.
    acme += push_many(push, 3)
    assert json.loads(run("publish_checkpoint")[1])["epoch"] == 3
    witness_round()
    ranges = merkle.consistency_ranges(5, 8)
    level, index = merkle.range_nodes(*ranges[0])[0]
    OrgTreeNode.objects.filter(org=cast.acme, level=level, index=index).update(hash=b"\xee" * 32)
    victim = next(
        i for i in range(8) if (level, index) in merkle.nodes_for(merkle.inclusion_ranges(i, 8))
    )
    code, report = monitor()
    assert code == 2
    org_id = OrgLog.objects.get(org=cast.acme).log_id
    assert report["alerts"] == [f"{org_id}: head 8 is not consistent with 5"]
    tampered = fetch_proof(url, cast.acme_key.secret, acme[victim]["content"]["action_hash"])
    receipt_file.write_text(json.dumps({**acme[victim], "transparency": [tampered]}))
    code, out, _ = run(*verify_args)
    assert code == 1
    assert json.loads(out)["reason"] == "org_inclusion_failed"


def fetch_proof(url: str, secret: str, action_hash: str) -> dict[str, Any]:
    import urllib.request

    request = urllib.request.Request(  # noqa: S310 (the test's own server)
        f"{url}/v1/receipts/{action_hash}/proof", headers={"x-api-key": secret}
    )
    with urllib.request.urlopen(request) as answer:  # noqa: S310 (the test's own server)
        return json.loads(answer.read())  # type: ignore[no-any-return]


def test_a_witness_refuses_a_log_that_rolls_back(cast, push, live_server, tmp_path) -> None:
    run("witness", "keygen", "w1.example", str(tmp_path / "w.key"))
    state = tmp_path / "w.state"
    state.write_text(json.dumps({ORIGIN: {"size": 99, "root": "00" * 32}}))
    push_many(push, 1)
    run("publish_checkpoint")
    code, _, err = run(
        "witness",
        "run",
        "--log",
        live_server.url,
        "--origin",
        ORIGIN,
        "--name",
        "w1.example",
        "--key-file",
        str(tmp_path / "w.key"),
        "--state-file",
        str(state),
    )
    assert code == 2
    assert "rollback" in err


def test_published_rows_cannot_be_rewritten(cast, push) -> None:
    push_many(push, 2)
    run("publish_checkpoint")
    with pytest.raises(DatabaseError), transaction.atomic():
        TopNode.objects.filter(level=0, index=0).update(hash=b"\0" * 32)
