"""The /verify page verifies receipts in the browser exactly as apps/receipts/verifier does.

Every receipt-level public vector runs through the page's JavaScript in Chromium and must
agree with the reference the way tests/receipts/verifier/test_vectors.py requires (the
deliberate server.md §1 deviations come out Malformed at decode), lifecycle receipts follow
server.md §1 (derived L0 offline, a differing claim reported, never refused), and a chain
window exported from a real mirrored chain verifies while a tampered one fails.
"""

from __future__ import annotations

import base64
import json
import os
from http import HTTPStatus
from pathlib import Path
from typing import Any

import pytest
from blake3 import blake3
from nacl.signing import SigningKey

from apps.receipts.mirror_chain import EMPTY_CHAIN_HEAD, chain_hash, receipt_digest
from apps.receipts.verifier import canonicalize, verify_ed25519
from tests.receipts.factories import Agent, canonical_bytes, seal, signature_entry
from tests.receipts.verifier.test_vectors import ASN1_DETAIL, DELIBERATE

VECTORS = Path(__file__).resolve().parents[1] / "data" / "vectors"
RECEIPT_FILES = ("receipts_valid", "receipts_invalid", "decoding_quirks", "ed25519_edge")

# server.md §1, written out (not taken from the Python verifier, which is checked separately):
# lifecycle kinds are held to the suite tags, and their level is derived, L0 offline for
# every kind, with a differing claim reported as claimed_trust_level, never refused.
LIFECYCLE_SERVER_RULES: dict[str, dict[str, str]] = {
    "suspended_wrong_alg_not_checked": {"kind": "WrongAlgorithm", "detail": "bogus"},
    "suspended_v1_version_not_checked": {
        "kind": "Unsupported",
        "detail": "action_version `heso-action/1.0` (this verifier supports `heso-action/2.0`)"
        " (a retired v1 receipt — re-verify it with a v1 verifier)",
    },
    "suspended_claims_L1_not_checked": {
        "kind": "Valid",
        "trust_level": "L0",
        "claimed_trust_level": "L1",
    },
}
VERDICT_MEMBERS = ("kind", "trust_level", "claimed_trust_level", "detail", "time_status")

# receipts.md §12: the signing domain of each lifecycle kind.
SUSPEND_DOMAIN = b"heso-action-suspend/v1\x00"
DECISION_DOMAIN = b"heso-action-decision/v1\x00"
ACTION_DOMAIN = b"heso-action/v1\x00"


def vector_cases(name: str, op: str | None = None) -> list[dict[str, Any]]:
    cases = json.loads((VECTORS / f"{name}.json").read_text())["cases"]
    return [case for case in cases if op is None or case["op"] == op]


def in_browser(page: Any, function: str, items: list[Any]) -> list[Any]:
    """Run ``window.<function>`` over ``items`` in one round trip."""
    return page.evaluate(
        f"async (items) => {{ const out = []; for (const item of items) "
        f"out.push(await window.{function}(item)); return out; }}",
        items,
    )


def disagreement(case: dict[str, Any], verdict: dict[str, Any]) -> str | None:
    """Why ``verdict`` does not agree with ``case`` (test_vectors.py's rules), or None."""
    if case["name"] in DELIBERATE:
        if verdict["kind"] == "Malformed" and verdict["stage"] == "decode":
            return None
        return f"deliberate deviation not Malformed at decode: {verdict}"
    expected = case["expected"]["verdict"]
    if verdict["kind"] != expected["kind"]:
        return f"kind {verdict['kind']} != {expected['kind']}"
    if verdict.get("trust_level") != expected.get("trust_level"):
        return f"trust_level {verdict.get('trust_level')} != {expected.get('trust_level')}"
    if verdict["time_status"] != expected["time_status"]:
        return "time_status"
    if verdict["stage"] == "decode":
        if not verdict["detail"].startswith("input is not a well-formed action receipt: "):
            return f"decode detail {verdict['detail']}"
    elif case["name"] not in ASN1_DETAIL and verdict.get("detail") != expected.get("detail"):
        return f"detail {verdict.get('detail')!r} != {expected.get('detail')!r}"
    return None


def test_the_page_carries_a_policy_that_forbids_any_network_request(client) -> None:
    response = client.get("/verify")
    assert response.status_code == HTTPStatus.OK
    policy = response["Content-Security-Policy"]
    assert "connect-src 'none'" in policy
    assert "form-action 'none'" in policy
    assert "default-src 'none'" in policy


def test_blake3_in_the_browser_matches_the_python_package(verifier) -> None:
    lengths = [0, 1, 63, 64, 65, 1023, 1024, 1025, 2048, 2049, 3072, 5000, 70_000]
    digests = verifier.evaluate(
        """(lengths) => lengths.map((n) => {
            const bytes = new Uint8Array(n);
            for (let i = 0; i < n; i++) bytes[i] = i % 251;
            return window.MirrorBlake3.hex(bytes);
        })""",
        lengths,
    )
    assert digests == [blake3(bytes(i % 251 for i in range(n))).hexdigest() for n in lengths]


def test_every_receipt_vector_agrees_with_the_reference(verifier) -> None:
    cases = [case for name in RECEIPT_FILES for case in vector_cases(name)]
    verdicts = in_browser(verifier, "mirrorVerify", [c["inputs"]["receipt_json"] for c in cases])
    problems = {
        case["name"]: problem
        for case, verdict in zip(cases, verdicts, strict=True)
        if (problem := disagreement(case, verdict)) is not None
    }
    assert problems == {}
    assert len(cases) == 143
    assert verifier.requests == []


def expected_lifecycle_verdict(case: dict[str, Any]) -> dict[str, str | None]:
    """The verdict server.md §1 gives a lifecycle vector: the reference's, except where §1
    decides otherwise; a Valid one is L0 (the reference echoes the claim)."""
    expected = dict(LIFECYCLE_SERVER_RULES.get(case["name"], case["expected"]["verdict"]))
    expected["time_status"] = "NoTrustedTime"
    if expected["kind"] == "Valid":
        expected["trust_level"] = "L0"
    return {name: expected.get(name) for name in VERDICT_MEMBERS}


def test_lifecycle_vectors_agree_with_the_reference_and_the_server_rules(verifier) -> None:
    cases = vector_cases("lifecycle")
    verdicts = in_browser(verifier, "mirrorVerify", [c["inputs"]["receipt_json"] for c in cases])
    got = {
        case["name"]: {name: verdict.get(name) for name in VERDICT_MEMBERS}
        for case, verdict in zip(cases, verdicts, strict=True)
    }
    assert got == {case["name"]: expected_lifecycle_verdict(case) for case in cases}
    assert got["suspended_claims_L1_not_checked"] == {
        "kind": "Valid",
        "trust_level": "L0",
        "claimed_trust_level": "L1",
        "detail": None,
        "time_status": "NoTrustedTime",
    }
    assert len(cases) == 25


def lifecycle_receipt(
    kind: str, signer: SigningKey, *, claim: str = "L1", rotation_role: str | None = None
) -> dict[str, Any]:
    """A valid ``kind`` link claiming ``claim``, signed by ``signer`` under its kind's domain."""
    content = Agent().content(kind=kind, trust_level=claim)
    if rotation_role is not None:
        content["key_rotation"] = {
            "role": rotation_role,
            "outgoing_public_key": base64.b64encode(bytes(32)).decode(),
            "incoming_public_key": base64.b64encode(bytes(signer.verify_key)).decode(),
        }
    decision = kind in ("approved", "denied", "expired", "escalated") or rotation_role == "decision"
    domain = (
        DECISION_DOMAIN if decision else SUSPEND_DOMAIN if kind == "suspended" else ACTION_DOMAIN
    )
    sealed = seal(content)
    role = "approver" if decision else "operator"
    return {
        "alg": "heso-action/v2+ed25519",
        "content": sealed,
        "signatures": [signature_entry(signer, role, domain + canonical_bytes(sealed))],
    }


LIFECYCLE_LINKS = [
    ("suspended", None),
    ("approved", None),
    ("denied", None),
    ("expired", None),
    ("escalated", None),
    ("completed", None),
    ("key_rotation", "producer"),
    ("key_rotation", "decision"),
]


def test_a_lifecycle_link_of_any_kind_claiming_l1_is_valid_l0_with_the_claim_reported(
    verifier,
) -> None:
    signer = SigningKey.generate()
    claimed = [
        json.dumps(lifecycle_receipt(k, signer, rotation_role=r)) for k, r in LIFECYCLE_LINKS
    ]
    honest = [
        json.dumps(lifecycle_receipt(k, signer, claim="L0", rotation_role=r))
        for k, r in LIFECYCLE_LINKS
    ]
    got = in_browser(verifier, "mirrorVerify", claimed + honest)
    shown = [{name: verdict.get(name) for name in VERDICT_MEMBERS} for verdict in got]
    valid = {"kind": "Valid", "trust_level": "L0", "detail": None, "time_status": "NoTrustedTime"}
    assert shown[: len(claimed)] == [{**valid, "claimed_trust_level": "L1"}] * len(claimed)
    assert shown[len(claimed) :] == [{**valid, "claimed_trust_level": None}] * len(honest)
    kinds = [verdict["receipt_kind"] for verdict in got[: len(claimed)]]
    assert kinds == [kind for kind, _ in LIFECYCLE_LINKS]


def test_an_action_receipt_claiming_an_unbacked_l1_is_still_refused(verifier) -> None:
    """The §1 lifecycle rule does not reach kind ``action``: its level must be backed."""
    receipt = json.dumps(Agent().receipt(trust_level="L1"))
    (verdict,) = in_browser(verifier, "mirrorVerify", [receipt])
    assert verdict["kind"] == "TrustLevelMismatch"
    assert verdict["detail"] == "embedded=L1 derived=L0"
    assert "trust_level" not in verdict
    assert "claimed_trust_level" not in verdict


def test_the_page_shows_a_claimed_level_as_a_claim(verifier) -> None:
    (case,) = [
        c for c in vector_cases("lifecycle") if c["name"] == "suspended_claims_L1_not_checked"
    ]
    verifier.fill("#input", case["inputs"]["receipt_json"])
    verifier.click("#verify")
    verifier.wait_for_selector("#result[data-summary='Valid']")
    assert verifier.inner_text("#result .pill") == "L0 (claimed L1)"
    shown = verifier.inner_text("#result")
    assert "L1 is claimed, not derived" in shown
    assert "TrustLevelMismatch" not in shown
    verifier.fill("#input", json.dumps(Agent().receipt()))
    verifier.click("#verify")
    verifier.wait_for_selector("#result[data-summary='Valid'] .pill:text-is('L0')")
    assert "claimed" not in verifier.inner_text("#result")
    assert verifier.requests == []


def test_canonical_bytes_and_action_hashes_agree_with_the_reference(verifier) -> None:
    cases = vector_cases("canonicalization")
    results = in_browser(verifier, "mirrorCanonical", [c["inputs"]["content_json"] for c in cases])
    for case, result in zip(cases, results, strict=True):
        if case["name"] in DELIBERATE or not case["expected"]["ok"]:
            assert result["ok"] is False, case["name"]
        else:
            assert result["canonical_hex"] == case["expected"]["canonical_hex"], case["name"]
            assert result["action_hash"] == case["expected"]["action_hash"], case["name"]


def test_link_hashes_and_session_chains_agree_with_the_reference(verifier) -> None:
    links = vector_cases("chains", op="link_hash")
    hashes = in_browser(verifier, "mirrorLinkHash", [c["inputs"]["content_json"] for c in links])
    assert hashes == [case["expected"]["link_hash"] for case in links]
    chains = vector_cases("chains", op="verify_chain")
    outcomes = in_browser(
        verifier, "mirrorVerifySessionChain", [c["inputs"]["chain_json"] for c in chains]
    )
    for case, outcome in zip(chains, outcomes, strict=True):
        expected = case["expected"]["outcome"]
        assert outcome["kind"] == expected["kind"], case["name"]
        for key in ("seq", "length", "receipt_kind", "detail"):
            assert outcome.get(key) == expected.get(key), (case["name"], key)
        if "reason" in expected:
            assert expected["reason"].startswith(outcome["reason"]), case["name"]


def _edge_signatures() -> list[tuple[str, str, str]]:
    """Keys and signatures where WebCrypto alone and libsodium (PyNaCl) could disagree."""
    key = SigningKey(bytes(range(32)))
    message = b"edge"
    good = key.sign(message).signature
    public = bytes(key.verify_key)
    order = 2**252 + 27742317777372353535851937790883648493
    s = int.from_bytes(good[32:], "little")
    small_order = [
        bytes(32),
        (1).to_bytes(32, "little"),
        bytes.fromhex("26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05"),
        bytes.fromhex("c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a"),
        (2**255 - 20).to_bytes(32, "little"),
        (2**255 - 19).to_bytes(32, "little"),
        (2**255 - 18).to_bytes(32, "little"),
    ]
    cases = [(public, good), (public, good[:32] + (s + order).to_bytes(32, "little"))]
    for point in small_order:
        flipped = point[:31] + bytes([point[31] | 0x80])
        for encoded in (point, flipped):
            cases.append((encoded, good))
            cases.append((public, encoded + good[32:]))
            cases.append((encoded, encoded + bytes(32)))
    for y in (2**255 - 17, 2**255 - 1, 2**255 - 19 + 9):  # non-canonical encodings
        cases.append((y.to_bytes(32, "little"), good))
    cases.append((os.urandom(32), good))
    cases.append((public, good[:63] + bytes([good[63] ^ 1])))
    b64 = base64.b64encode
    return [(b64(k).decode(), b64(sig).decode(), message.hex()) for k, sig in cases]


def test_strict_ed25519_in_the_browser_agrees_with_pynacl(verifier) -> None:
    cases = _edge_signatures()
    got = verifier.evaluate(
        """async (cases) => {
            const core = window.MirrorCore; const out = [];
            for (const [key, sig, message] of cases)
                out.push(await core.verifyEd25519(key, sig, core.fromHex(message)));
            return out;
        }""",
        cases,
    )
    expected = [verify_ed25519(key, sig, bytes.fromhex(message)) for key, sig, message in cases]
    assert got == expected


# --- Chain windows exported from a real mirror ---------------------------------------------


@pytest.fixture
def exported_window(cast, push, dashboard) -> dict[str, Any]:
    agent = Agent()
    approver = SigningKey.generate()
    content = agent.content()
    content["action"]["fields"] = {"amount": 12.5, "big": 12345678901234567890, "é": "ü"}
    unusual = agent.sign(content)
    suspended = agent.receipt()
    for receipt in [unusual, suspended, *agent.session("sess-1", 3), agent.receipt()]:
        assert push(receipt).status_code == HTTPStatus.CREATED
    approved = agent.approve_l1(suspended, approver)
    response = push(approved, supersedes=suspended["content"]["action_hash"])
    assert response.status_code == HTTPStatus.CREATED, response.json()
    window = dashboard("auditor").get("/v1/audit/chain").json()
    assert window["size"] == 7
    return window


def verify_window(page: Any, window: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = page.evaluate(
        "(text) => window.mirrorVerifyInput(text)", json.dumps(window)
    )
    return result


def test_an_exported_chain_window_verifies_in_the_browser(verifier, exported_window) -> None:
    result = verify_window(verifier, exported_window)
    assert result["type"] == "chain_window"
    assert result["problems"] == []
    assert result["kind"] == "ChainValid"
    assert result["head_checked"] is True
    assert [entry["seq"] for entry in result["entries"]] == [1, 2, 3, 4, 5, 6, 7]
    assert [entry["verdict"]["trust_level"] for entry in result["entries"]][-1] == "L1"
    assert verifier.requests == []


def test_an_older_window_verifies_without_the_head(verifier, exported_window) -> None:
    window = {**exported_window, "entries": exported_window["entries"][2:5]}
    result = verify_window(verifier, window)
    assert result["kind"] == "ChainValid"
    assert result["head_checked"] is False


def test_a_tampered_receipt_breaks_the_window(verifier, exported_window) -> None:
    entries = [dict(entry) for entry in exported_window["entries"]]
    entries[3]["receipt"] = entries[3]["receipt"].replace('"search"', '"delete_everything"')
    result = verify_window(verifier, {**exported_window, "entries": entries})
    assert result["kind"] == "ChainBroken"
    seq = entries[3]["seq"]
    assert any(
        p.startswith(f"seq {seq}: receipt does not verify: HashMismatch")
        for p in result["problems"]
    )
    assert any(p.startswith(f"seq {seq}: receipt_digest") for p in result["problems"])


def test_a_dropped_signature_with_recomputed_digest_still_breaks_the_chain(
    verifier, exported_window
) -> None:
    """Swap a stored receipt for another valid one and fix its digest: the chain_hash fails."""
    entries = [dict(entry) for entry in exported_window["entries"]]
    other = Agent().receipt()
    from apps.receipts.verifier import verify_receipt

    stored = verify_receipt(json.dumps(other)).receipt
    assert stored is not None
    entries[1]["receipt"] = stored.stored_text
    entries[1]["action_hash"] = other["content"]["action_hash"]
    entries[1]["receipt_digest"] = blake3(stored.stored_text.encode()).hexdigest()
    result = verify_window(verifier, {**exported_window, "entries": entries})
    assert result["kind"] == "ChainBroken"
    assert any("chain_hash" in p for p in result["problems"])


def test_a_rewritten_head_or_reordered_link_is_reported(verifier, exported_window) -> None:
    result = verify_window(verifier, {**exported_window, "head": "ab" * 32})
    assert result["kind"] == "ChainBroken"
    assert any(p.startswith("head ") for p in result["problems"])
    entries = [dict(entry) for entry in exported_window["entries"]]
    del entries[2]
    result = verify_window(verifier, {**exported_window, "entries": entries})
    assert result["kind"] == "ChainBroken"
    assert any("entries are missing" in p for p in result["problems"])


def mirrored_window(links: list[tuple[dict[str, Any], str]]) -> dict[str, Any]:
    """A chain window as GET /v1/audit/chain exports it (server.md §3), built here from
    (receipt, stored trust_level) pairs, so that the stored level can be any the mirror
    may derive (server.md §1: L1 for a decision signed by a registered approver key)."""
    entries = []
    prev = EMPTY_CHAIN_HEAD
    for seq, (receipt, level) in enumerate(links, start=1):
        stored = canonicalize(receipt).decode()
        digest = receipt_digest(stored)
        action_hash = receipt["content"]["action_hash"]
        link = chain_hash(
            prev_chain_hash=prev, seq=seq, action_hash=action_hash, receipt_digest_hex=digest
        )
        entries.append(
            {
                "seq": seq,
                "action_hash": action_hash,
                "kind": receipt["content"].get("kind", "action"),
                "trust_level": level,
                "receipt_digest": digest,
                "supersedes_action_hash": None,
                "superseded_by": None,
                "prev_chain_hash": prev,
                "chain_hash": link,
                "received_at": "2026-11-20T10:00:00Z",
                "receipt": stored,
            }
        )
        prev = link
    return {"head": prev, "size": len(entries), "entries": entries[::-1]}


def test_a_window_accepts_the_mirrors_l1_for_a_decision_link_and_says_why(verifier) -> None:
    approver = SigningKey.generate()
    window = mirrored_window(
        [
            (Agent().receipt(), "L0"),
            (lifecycle_receipt("suspended", SigningKey.generate(), claim="L0"), "L0"),
            (lifecycle_receipt("approved", approver), "L1"),
            (lifecycle_receipt("denied", approver, claim="L0"), "L0"),
        ]
    )
    result = verify_window(verifier, window)
    assert result["problems"] == []
    assert result["kind"] == "ChainValid"
    notes = {entry["seq"]: entry["notes"] for entry in result["entries"]}
    assert notes[1] == notes[2] == notes[4] == []
    assert len(notes[3]) == 1
    assert "registered approver keys" in notes[3][0]
    approved = result["entries"][2]["verdict"]
    assert (approved["trust_level"], approved["claimed_trust_level"]) == ("L0", "L1")
    verifier.fill("#input", json.dumps(window))
    verifier.click("#verify")
    verifier.wait_for_selector("#result[data-summary='ChainValid']")
    assert "registered approver keys" in verifier.inner_text("#result")
    assert verifier.requests == []


def test_a_window_refuses_l1_for_a_link_that_needs_no_decision_authority(verifier) -> None:
    signer = SigningKey.generate()
    window = mirrored_window(
        [
            (lifecycle_receipt("suspended", signer), "L1"),
            (lifecycle_receipt("completed", signer, claim="L0"), "L1"),
            (lifecycle_receipt("key_rotation", signer, rotation_role="producer"), "L1"),
        ]
    )
    result = verify_window(verifier, window)
    assert result["kind"] == "ChainBroken"
    assert result["problems"] == [
        f"seq {seq}: trust_level L1 but the receipt derives L0" for seq in (1, 2, 3)
    ]


def test_the_page_verifies_pasted_text_and_jsonl_without_any_request(verifier) -> None:
    agent = Agent()
    receipts = [json.dumps(agent.receipt()) for _ in range(3)]
    verifier.fill("#input", receipts[0])
    verifier.click("#verify")
    verifier.wait_for_selector("#result[data-summary='Valid']")
    assert "L0" in verifier.inner_text("#result")
    tampered = receipts[2].replace('"weather"', '"rain"')
    verifier.fill("#input", "\n".join([receipts[0], receipts[1], tampered]))
    verifier.click("#verify")
    verifier.wait_for_selector("#result[data-summary='2/3']")
    assert "HashMismatch" in verifier.inner_text("#result")
    verifier.fill("#input", '{"alg": 1}')
    verifier.click("#verify")
    verifier.wait_for_selector("#result[data-summary='Malformed']")
    assert verifier.requests == []


def test_a_dropped_file_is_read_and_verified_locally(verifier, tmp_path) -> None:
    path = tmp_path / "receipts.jsonl"
    agent = Agent()
    path.write_text("\n".join(json.dumps(agent.receipt()) for _ in range(2)) + "\n")
    verifier.set_input_files("#file", str(path))
    verifier.wait_for_selector("#result[data-summary='2/2']")
    bom = tmp_path / "bom.json"
    bom.write_bytes(b"\xef\xbb\xbf" + json.dumps(agent.receipt()).encode())
    verifier.set_input_files("#file", str(bom))
    verifier.wait_for_selector("#result[data-summary='Malformed']")
    assert verifier.requests == []
