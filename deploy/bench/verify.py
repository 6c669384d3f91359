#!/usr/bin/env python
"""Receipts verified per second per core, for three realistic receipt shapes.

    python deploy/bench/verify.py [--seconds 2]

Shapes (about 1.5 KB each, like the SDK's tool-call receipts): a single L0 receipt, a
single-approver L1 receipt, and a 2-of-3 quorum L1 receipt. Each is verified from its JSON
bytes (parse, decode, canonicalize, BLAKE3, Ed25519), single-threaded, best of several
rounds. When the proprietary `heso` package happens to be importable (a throwaway
environment; it is never a dependency), the reference's native verifier is timed on the
same bytes in the same process and the ratio is printed.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from nacl.signing import SigningKey

from apps.receipts.verifier import canonicalize, verify_receipt
from tests.receipts.factories import (
    ACTION_DOMAIN,
    APPROVAL_DOMAIN,
    Agent,
    as_text,
    public_b64,
    seal,
    signature_entry,
)


def realistic_fields() -> dict[str, Any]:
    return {
        "query": "quarterly filings for ACME Corp, 10-K and 10-Q, fiscal 2026",
        "filters": {"form_types": ["10-K", "10-Q"], "since": "2026-01-01", "limit": 25},
        "headers": {"accept": "application/json", "user-agent": "research-agent/1.4"},
        "request_id": "req_01HZX3J9K2M4N6P8Q0R2S4T6V8",
    }


def l0(agent: Agent) -> dict[str, Any]:
    return agent.receipt(
        action={**agent.content()["action"], "fields": realistic_fields()},
        session_id="sess-8c1f2d", seq=41, prev_receipt_hash="ab" * 32,
    )  # fmt: skip


def l1(agent: Agent) -> dict[str, Any]:
    return agent.approve_l1(l0(agent), SigningKey.generate())


def quorum(agent: Agent) -> dict[str, Any]:
    approvers = [SigningKey.generate() for _ in range(3)]
    roster = sorted(public_b64(key) for key in approvers)
    content = {k: v for k, v in l0(agent)["content"].items() if k != "action_hash"}
    content["trust_level"] = "L1"
    records = [
        {"decision": "approved", "approver_identity": public_b64(key), "reason": "ok",
         "decided_at": "2026-11-20T10:05:00Z"}
        for key in approvers[:2]
    ]  # fmt: skip

    def body(with_records: list[dict[str, Any]]) -> bytes:
        variant = {**content, "multi_approval": {"threshold": 2, "roster": roster,
                                                 "approvers": with_records}}  # fmt: skip
        return canonicalize(variant)

    final = seal({**content, "multi_approval": {"threshold": 2, "roster": roster,
                                                "approvers": records}})  # fmt: skip
    signatures = [signature_entry(agent.key, "operator", ACTION_DOMAIN + body([]))]
    for key, record in zip(approvers, records, strict=False):
        signatures.append(signature_entry(key, "approver", APPROVAL_DOMAIN + body([record])))
    return {"alg": "heso-action/v2+ed25519", "content": final, "signatures": signatures}


def rate(call: Callable[[bytes], Any], data: bytes, seconds: float) -> float:
    """Best of five rounds, in calls per second."""
    best = 0.0
    for _ in range(5):
        count, started = 0, time.perf_counter()
        deadline = started + seconds / 5
        while time.perf_counter() < deadline:
            for _ in range(50):
                call(data)
            count += 50
        best = max(best, count / (time.perf_counter() - started))
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=2.0)
    args = parser.parse_args()
    try:
        from heso._core import verify_action_receipt as reference
    except ImportError:
        reference = None
    agent = Agent()
    print(
        f"{'shape':<14} {'bytes':>6} {'ours/s':>9} {'us':>7}"
        + ("  heso/s      us  ratio" if reference else "")
    )
    for name, build in (("single L0", l0), ("single L1", l1), ("2-of-3 quorum", quorum)):
        data = as_text(build(agent)).encode()
        verdict = verify_receipt(data)
        assert verdict.is_valid, verdict.as_dict()
        ours = rate(verify_receipt, data, args.seconds)
        line = f"{name:<14} {len(data):>6} {ours:>9.0f} {1e6 / ours:>7.1f}"
        if reference is not None:
            assert reference(data)["kind"] == "Valid"
            theirs = rate(reference, data, args.seconds)
            line += f"  {theirs:>6.0f} {1e6 / theirs:>7.1f}  {theirs / ours:.2f}x"
        print(line)


if __name__ == "__main__":
    main()
