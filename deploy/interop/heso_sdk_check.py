"""Live check: every heso 0.5.1 SDK cloud call against a running key-scoped service.

heso is never a dependency of this project: run this in a throwaway venv. The org needs
two API keys, MIRROR_API_KEY (scopes receipts:write,policy:read,approvals:write) and
MIRROR_ADMIN_API_KEY (scope approvers:write), and the policy this script prints deployed
(MIRROR_POLICY_FILE names the deployed file):

    python3 -m venv /tmp/hesovenv && /tmp/hesovenv/bin/pip install heso==0.5.1 pynacl
    /tmp/hesovenv/bin/python deploy/interop/heso_sdk_check.py policy > /tmp/check-policy.toml
    manage.py deploy_policy <org> /tmp/check-policy.toml
    MIRROR_URL=http://127.0.0.1:8000 MIRROR_API_KEY=hk_... MIRROR_ADMIN_API_KEY=hk_... \
    MIRROR_POLICY_FILE=/tmp/check-policy.toml \
        /tmp/hesovenv/bin/python deploy/interop/heso_sdk_check.py

One line per flow, `ok <flow>: ...` or `FAIL <flow>: ...` (with the server's answer); the
exit status is non-zero if any flow failed. Flows: pull (fetch_policy), push (push_receipt,
duplicate), an approval opened with the SDK's defaults before any approver key exists (on
a fresh org), register_approver_pubkey (upsert, rotation, refusals), a single approver
(submit_token without a leg, the leg attached afterwards, get_l1_parts, heso.finalize_l1), a
2-of-3 quorum (get_quorum_parts, heso.finalize_quorum), a threshold above the roster, the
suspend ticket (open/poll/submit_token/get_l1_parts by SuspendedError.action_hash), the
console URL the SDK prints, and three heso.gated sessions pushed in order (decision key not
an approver key, an approver key, the public placeholder).

Every receipt is minted by the SDK's own engine in throwaway heso projects under
$HESO_CHECK_WORK (default: a new temporary directory), with fresh content on every run, so
reruns against the same org work. Keys are fixed where the org needs them: the operator
(seed [5]*32; never the placeholder [7]*32) and approvers sdk-check-approver-1/-2 (seeds
[11]*32, [12]*32; approver-1 also signs the gated session that must be L1).
sdk-check-approver-3 is rotated to a new random key on every run (the previous one is
revoked), so the org's active approver keys stay exactly three: the 2-of-3 quorum signs over
that roster, and an org with other active approver keys fails the quorum flow.

The SDK hands the caller of a suspended decorated action only its ticket; the suspended
receipt itself is read from the engine's raw output (heso._core.process is wrapped, as
deploy/interop/make_sdk_corpus.py does). heso.cloud's urlopen is wrapped too, to read each
answer's status and extra members (trust_level, claimed_trust_level, change) that the SDK's
return values drop, and to wait out a 429. Neither changes what the SDK sends.
MIRROR_INTEROP_OUT (optional) receives the single-approver and quorum suspended/L1 pairs
(the shape of tests/data/sdk/approvals_interop.json).
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import struct
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar, cast

import heso
import heso._core as core
from heso import _suspend
from heso._runtime import require_config
from heso.cloud import approvals as capprovals
from heso.cloud import client as cclient
from heso.cloud import outbox
from heso.cloud import policy as cpolicy
from nacl.signing import SigningKey

REPO = Path(__file__).resolve().parents[2]
BASE = os.environ.get("MIRROR_URL", "http://127.0.0.1:8000").rstrip("/")
KEY = os.environ.get("MIRROR_API_KEY", "")
ADMIN_KEY = os.environ.get("MIRROR_ADMIN_API_KEY", "")
POLICY_FILE = os.environ.get("MIRROR_POLICY_FILE", "")
RUN = secrets.token_hex(4)

OPERATOR_SEED = bytes([5]) * 32
PLACEHOLDER_SEED = bytes([7]) * 32  # heso.gated's public placeholder decision key
APPROVER_SEEDS = {
    "sdk-check-approver-1": bytes([11]) * 32,
    "sdk-check-approver-2": bytes([12]) * 32,
}
ROTATED_KEY_ID = "sdk-check-approver-3"
INSECURE_ENV = "HESO_ALLOW_INSECURE_LOCAL_DECISION_KEY"
assert OPERATOR_SEED != PLACEHOLDER_SEED

CHECK_POLICY = """\
# heso_sdk_check.py: tool calls allowed, payments above 1,000 need a human.

[[rule]]
id = "tool.allow"
order = 10
enabled = true
subject = { kind = "any" }
verb = "tool_call"
scope = "*"
decision = "allow"

[[rule]]
id = "payment.large.requires_approval"
order = 20
enabled = true
subject = { kind = "any" }
verb = "payment"
scope = "*"
decision = "require_approval"
approvers = ["Finance"]
sla_minutes = 60
conditions = [{ field = "amount", op = "gt", value = 1000, display = "amount > 1,000" }]
"""


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def pub(key: SigningKey) -> str:
    return b64(bytes(key.verify_key))


OPERATOR_PUB = pub(SigningKey(OPERATOR_SEED))
PLACEHOLDER_PUB = pub(SigningKey(PLACEHOLDER_SEED))
APPROVERS = {key_id: SigningKey(seed) for key_id, seed in APPROVER_SEEDS.items()}


class Fail(Exception):
    """A flow failed; the message says what was sent and what the server answered."""


def need(condition: object, message: str) -> None:
    if not condition:
        raise Fail(message)


# --- tap 1: the engine's raw output (a suspension's receipt never reaches the caller)
ENGINE: list[dict[str, Any]] = []
_engine_process = core.process


def _tapped_process(payload: bytes, project_root: str) -> bytes:
    out: bytes = _engine_process(payload, project_root)
    ENGINE.append(json.loads(out))
    return out


core.process = _tapped_process


# --- tap 2: every HTTP exchange the SDK makes (status and full answer)
@dataclass
class Exchange:
    method: str
    url: str
    sent: Any
    status: int
    raw: bytes

    @property
    def answer(self) -> Any:
        try:
            return json.loads(self.raw)
        except ValueError:
            return self.raw.decode(errors="replace")[:300]

    def __str__(self) -> str:
        return f"{self.method} {self.url[len(BASE) :]} -> {self.status} {json.dumps(self.answer)}"


EXCHANGES: list[Exchange] = []
_real_urlopen = cclient.urlopen


class _Answer:
    def __init__(self, raw: bytes) -> None:
        self._raw = raw

    def __enter__(self) -> _Answer:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def read(self) -> bytes:
        return self._raw


def _tapped_urlopen(req: Any, timeout: float = 10.0) -> _Answer:
    sent = json.loads(req.data) if req.data else None
    for attempt in range(8):
        try:
            with _real_urlopen(req, timeout=timeout) as resp:
                raw, status = resp.read(), resp.status
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            if exc.code == 429 and attempt < 7:
                time.sleep(float(exc.headers.get("Retry-After") or 1))
                continue
            EXCHANGES.append(Exchange(req.get_method(), req.full_url, sent, exc.code, raw))
            raise
        EXCHANGES.append(Exchange(req.get_method(), req.full_url, sent, status, raw))
        return _Answer(raw)
    raise AssertionError("unreachable")


cclient.urlopen = _tapped_urlopen
SDK_ERRORS = (capprovals.ApprovalsError, outbox.OutboxError, cpolicy.PolicyFetchError)


def sdk(call: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, Exchange]:
    """Run one SDK cloud call that must succeed: its return value and the HTTP exchange."""
    mark = len(EXCHANGES)
    try:
        result = call(*args, **kwargs)
    except SDK_ERRORS as exc:
        answered = f"; {EXCHANGES[-1]}" if len(EXCHANGES) > mark else ""
        raise Fail(f"{call.__name__} raised {exc}{answered}") from None
    return result, EXCHANGES[-1]


def sdk_refused(call: Callable[..., Any], *args: Any, **kwargs: Any) -> Exchange:
    """Run one SDK cloud call that must be refused: the HTTP exchange."""
    mark = len(EXCHANGES)
    try:
        call(*args, **kwargs)
    except SDK_ERRORS:
        need(len(EXCHANGES) > mark, f"{call.__name__}: no HTTP answer (network?)")
        return EXCHANGES[-1]
    raise Fail(f"{call.__name__} succeeded where a refusal was due: {EXCHANGES[-1]}")


def raw_http(method: str, path: str, body: Any = None, key: str | None = None) -> Exchange:
    """What the SDK cannot send (a vote's co-signed leg) or does not expose (409 details)."""
    if not BASE.startswith(("http://", "https://")):
        raise SystemExit("MIRROR_URL must be http(s)")
    data = json.dumps(body).encode() if body is not None else None
    headers = {"x-api-key": KEY if key is None else key, "Accept": "application/json"}
    if data is not None:
        headers["Content-Type"] = "application/json"
    req = urllib.request.Request(BASE + path, data=data, method=method, headers=headers)  # noqa: S310
    for attempt in range(8):
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:  # noqa: S310 (scheme checked)
                return Exchange(method, BASE + path, body, resp.status, resp.read())
        except urllib.error.HTTPError as exc:
            if exc.code == 429 and attempt < 7:
                time.sleep(float(exc.headers.get("Retry-After") or 1))
                continue
            return Exchange(method, BASE + path, body, exc.code, exc.read())
    raise AssertionError("unreachable")


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


@contextmanager
def api_key(secret: str) -> Iterator[None]:
    """heso.cloud.configure is process-wide: switch keys for a block, then switch back."""
    cclient.configure(api_key=secret, endpoint=BASE)
    try:
        yield
    finally:
        cclient.configure(api_key=KEY, endpoint=BASE)


# --- approval tokens, records and legs, as an approver's device makes them


def canonical(content: dict[str, Any]) -> bytes:
    return bytes(core.action_canonical_bytes(json.dumps(content).encode()))


def token(signer: SigningKey, content: dict[str, Any], scope: str, tag: bytes = b"\x01") -> str:
    """approvals.md §1-§2: fresh nonce, 10-minute expiry, over C of the suspended content."""
    nonce = secrets.token_bytes(32)
    expiry = int(time.time()) + 600
    s = scope.encode()
    fields = nonce + struct.pack(">Q", expiry) + tag + struct.pack(">I", len(s)) + s
    sig = signer.sign(b"heso-approval-token/v1\x00" + fields + canonical(content)).signature
    return b64(fields + sig + bytes(signer.verify_key))


def record(signer: SigningKey) -> str:
    """An ApproverRecord as JSON text; the service stores and relays it verbatim."""
    return json.dumps(
        {
            "decision": "approved",
            "approver_identity": pub(signer),
            "reason": f"sdk check {RUN}",
            "decided_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
    )


def leg_vote(
    signer: SigningKey, content: dict[str, Any], threshold: int, roster: list[str]
) -> dict[str, Any]:
    """A submit-token body carrying the co-signed leg (§5 payload or §6 quorum payload)."""
    rec = record(signer)
    c = json.dumps(content).encode()
    if threshold == 1:
        payload = core.l1_cosign_payload(c, rec.encode())
    else:
        roster_json = json.dumps(roster).encode()
        payload = core.quorum_cosign_payload(c, threshold, roster_json, rec.encode())
    return {
        "token_b64": token(signer, content, content["policy"]["rule_id"]),
        "action_content": content,
        "decision": "approved",
        "record": rec,
        "co_sig_b64": b64(signer.sign(bytes(payload)).signature),
    }


def view_of(ex: Exchange) -> str:
    a = ex.answer
    return f"{a.get('status')} {a.get('approved_count')}/{a.get('threshold')}"


# --- throwaway heso projects and the engine's receipts

WORK = Path(os.environ.get("HESO_CHECK_WORK") or tempfile.mkdtemp(prefix="heso-sdk-check-"))
if WORK.resolve() == REPO or REPO in WORK.resolve().parents:
    raise SystemExit("HESO_CHECK_WORK must be outside the repository")
STATE: dict[str, Any] = {}


def project(name: str, decision_seed: bytes | None) -> Path:
    """A heso project whose heso.toml is the policy the service serves."""
    need("policy" in STATE, "needs the pull flow's policy")
    root = WORK / f"{name}-{RUN}"
    (root / "heso-local-data").mkdir(parents=True, exist_ok=True)
    (root / "heso.toml").write_text(STATE["policy"], encoding="utf-8")
    (root / "heso-local-data" / "identity.key").write_bytes(OPERATOR_SEED)
    if decision_seed is not None:
        (root / "heso-local-data" / "decision.key").write_bytes(decision_seed)
    return root


def use(root: Path) -> None:
    heso.init(project_root=str(root), workflow=f"sdk-check-{RUN}", account="sdk-check")


F = TypeVar("F", bound=Callable[..., Any])


def typed(decorator: Any) -> Callable[[F], F]:
    """heso is untyped: keep mypy's view of each decorated function."""
    return cast(Callable[[F], F], decorator)


@typed(heso.tool)
def lookup_invoice(invoice: str, run: str) -> str:
    return "found"


@typed(heso.action("payment.authorize_payment"))
def charge_card(amount: float, currency: str, payee: str) -> str:
    return "charged"


def wire_transfer(amount: int, currency: str, payee: str) -> dict[str, Any]:
    return {"transfer": "done", "amount": amount}


gated_wire_transfer = heso.gated(sla="2h", on_timeout="deny")(wire_transfer)


def suspend_payment(label: str) -> tuple[str, dict[str, Any]]:
    """A decorated payment the policy sends to a human: (the SDK's ticket, the receipt)."""
    use(STATE.get("app") or project("app", None))
    mark = len(ENGINE)
    amount = 1001 + secrets.randbelow(90000)
    try:
        charge_card(amount, "EUR", f"{label} {RUN}")
    except heso.SuspendedError as exc:
        outs = [o for o in ENGINE[mark:] if o.get("status") == "suspended"]
        need(len(outs) == 1, f"engine output for the suspension: {ENGINE[mark:]}")
        STATE["last_suspend_message"] = str(exc)
        return str(exc.action_hash), outs[0]["receipt"]
    raise Fail(
        f"charge_card({amount}) was not suspended: the deployed policy must send payments "
        "above 1,000 to a human (deploy `heso_sdk_check.py policy`)"
    )


def push_new(receipt: dict[str, Any], **kwargs: Any) -> Exchange:
    """push_receipt that must append (201 appended)."""
    pushed, ex = sdk(outbox.push_receipt, receipt, **kwargs)
    need(ex.status == 201 and ex.answer.get("status") == "appended", f"push: {ex}")
    need(not pushed.duplicate and pushed.seq == ex.answer.get("seq"), f"push: {pushed} / {ex}")
    return ex


def assembly_missing_legs(action_hash: str, missing: int) -> str:
    """Approved with legs missing: the SDK's call 409s and the detail says how many."""
    refused = sdk_refused(capprovals.get_l1_parts, action_hash)
    need(refused.status == 409, f"get_l1_parts before the leg: {refused}")
    detail = str(refused.answer.get("detail", "")) if isinstance(refused.answer, dict) else ""
    need(
        "leg" in detail and str(missing) in detail and "not yet approved" not in detail,
        f"assembly of an approved approval missing {missing} leg(s): {refused} (server.md §6: "
        "409 whose detail says how many legs are missing, not 'not yet approved')",
    )
    return detail


# --- flows


def flow_pull() -> str:
    toml, ex = sdk(cpolicy.fetch_policy)
    STATE["policy"] = toml
    need(POLICY_FILE, "MIRROR_POLICY_FILE is not set (the policy file deployed to the org)")
    deployed = Path(POLICY_FILE).read_text(encoding="utf-8")
    need(toml == deployed, f"fetch_policy() differs from {POLICY_FILE}: {ex}")
    policy_hash = str(core.blake3_hash(toml.encode()))
    answer = ex.answer
    need(
        answer.get("policy_hash") == policy_hash
        and answer.get("policy_id") == "pol_" + policy_hash[:24],
        f"policy_hash/policy_id are not BLAKE3 of the TOML (server.md §7): {ex}",
    )
    return f"fetch_policy() == {POLICY_FILE} ({len(toml)} bytes), {answer['policy_id']}"


def flow_push() -> str:
    STATE["app"] = project("app", None)
    use(STATE["app"])
    mark = len(ENGINE)
    with heso.step(workflow=f"sdk-check-push-{RUN}"):
        for i in range(3):
            lookup_invoice(f"INV-{RUN}-{i}", RUN)
    receipts = [o["receipt"] for o in ENGINE[mark:] if o.get("status") == "allowed"]
    need(len(receipts) == 3, f"the policy did not allow the tool calls: {ENGINE[mark:]}")
    local = Path(STATE["app"], "heso-local-data", "receipts.jsonl").read_text().splitlines()
    need([json.loads(line) for line in local[-3:]] == receipts, "receipts.jsonl differs")
    seqs = []
    for r in receipts:
        ex = push_new(r)
        need(ex.answer.get("trust_level") == "L0", f"push of an L0 receipt: {ex}")
        need(ex.answer.get("entry_hash") == r["content"]["action_hash"], f"entry_hash: {ex}")
        seqs.append(ex.answer["seq"])
    need(seqs == sorted(seqs) and len(set(seqs)) == 3, f"seqs not increasing: {seqs}")
    again, ex = sdk(outbox.push_receipt, receipts[0])
    need(
        ex.status == 200 and again.duplicate and again.seq == seqs[0],
        f"re-push: {ex} (server.md §2: 200 duplicate with the existing seq)",
    )
    return (
        f"3 engine receipts (session seq 0..2) appended at seq {seqs}, L0; "
        f"re-push -> 200 duplicate seq {again.seq}"
    )


def flow_open_without_keys() -> str:
    _, receipt = suspend_payment("no-keys")
    content = receipt["content"]
    action_hash = content["action_hash"]
    STATE["p1"] = receipt
    push_new(receipt)
    view, ex = sdk(capprovals.open_approval, action_hash)  # SDK defaults: rule_id "", [] , ""
    need(ex.sent["rule_id"] == "" and ex.sent["matched_conditions"] == [], f"sent {ex.sent}")
    need(ex.sent["scope"] == "", f"sent {ex.sent}")
    need(
        ex.status == 201 and view.status == "pending" and view.threshold == 1,
        f"first explicit open: {ex} (server.md §6: 201 pending, also with no approver keys)",
    )
    need(view.action_hash == action_hash, f"open answered another action: {ex}")
    again, ex2 = sdk(capprovals.open_approval, action_hash)
    need(ex2.status == 200 and again.approval_id == view.approval_id, f"re-open: {ex2}")
    return f"{view.approval_id} 201 pending 0/1 (SDK defaults), re-open 200"


def flow_register() -> str:
    need(ADMIN_KEY, "MIRROR_ADMIN_API_KEY (scope approvers:write) is not set")
    a1 = pub(APPROVERS["sdk-check-approver-1"])
    lacking = sdk_refused(capprovals.register_approver_pubkey, "sdk-check-approver-1", a1)
    detail = json.dumps(lacking.answer)
    need(
        lacking.status == 403 and "approvers:write" in detail,
        f"register with a key lacking approvers:write: {lacking} (server.md §6: 403 saying so)",
    )
    changes = []
    with api_key(ADMIN_KEY):
        for key_id, signer in APPROVERS.items():
            _, ex = sdk(capprovals.register_approver_pubkey, key_id, pub(signer), label="check")
            a = ex.answer
            need(
                ex.status == 200
                and a.get("status") == "registered"
                and a.get("key_id") == key_id
                and a.get("public_key") == pub(signer)
                and a.get("label") == "check",
                f"register {key_id}: {ex}",
            )
            changes.append(a.get("change"))
        _, ex = sdk(capprovals.register_approver_pubkey, "sdk-check-approver-1", a1, label="check")
        need(ex.status == 200 and ex.answer.get("change") == "unchanged", f"same again: {ex}")
        old, new = SigningKey.generate(), SigningKey.generate()
        _, first = sdk(capprovals.register_approver_pubkey, ROTATED_KEY_ID, pub(old))
        _, rotated = sdk(capprovals.register_approver_pubkey, ROTATED_KEY_ID, pub(new))
        need(
            rotated.status == 200
            and rotated.answer.get("change") == "rotated"
            and rotated.answer.get("public_key") == pub(new),
            f"re-register {ROTATED_KEY_ID} with another key: {rotated} (server.md §6: upsert, "
            "200 registered, the old key revoked)",
        )
        placeholder = sdk_refused(
            capprovals.register_approver_pubkey, "sdk-check-placeholder", PLACEHOLDER_PUB
        )
        need(placeholder.status == 409, f"placeholder key: {placeholder}")
        operator = sdk_refused(
            capprovals.register_approver_pubkey, "sdk-check-operator", OPERATOR_PUB
        )
        need(operator.status == 409, f"operator key (seen in the org's receipts): {operator}")
    APPROVERS[ROTATED_KEY_ID] = new
    STATE["revoked"] = old
    STATE["roster"] = sorted(pub(k) for k in APPROVERS.values())
    fresh = "org had no approver keys before" if changes == ["registered"] * 2 else "rerun"
    return (
        f"approver-1/-2 {'/'.join(changes)} ({fresh}), same again unchanged; "
        f"{ROTATED_KEY_ID} {first.answer.get('change')} then rotated (200); placeholder 409, "
        f"operator 409, 403 without approvers:write"
    )


def flow_single() -> str:
    need("p1" in STATE and "revoked" in STATE, "needs the open-without-keys and register flows")
    receipt = STATE["p1"]
    content = receipt["content"]
    action_hash = content["action_hash"]
    rule = content["policy"]["rule_id"]
    approver = APPROVERS["sdk-check-approver-1"]
    revoked = sdk_refused(
        capprovals.submit_token, action_hash, token(STATE["revoked"], content, rule), content
    )
    need(revoked.status == 403, f"vote by the rotated-out (revoked) key: {revoked}")
    view, ex = sdk(capprovals.submit_token, action_hash, token(approver, content, rule), content)
    need(
        view.status == "approved" and view.approved_count == 1,
        f"submit_token without a leg: {ex} (server.md §6: it still counts)",
    )
    detail = assembly_missing_legs(action_hash, 1)
    attach = raw_http(
        "POST", f"/v1/approvals/{action_hash}/submit-token", leg_vote(approver, content, 1, [])
    )
    need(
        attach.status == 200 and view_of(attach) == "approved 1/1",
        f"the same key's leg attached afterwards: {attach} (server.md §6: 200, vote unchanged)",
    )
    other = sdk_refused(
        capprovals.submit_token,
        action_hash,
        token(APPROVERS["sdk-check-approver-2"], content, rule),
        content,
    )
    need(other.status == 409, f"another vote on the resolved approval: {other}")
    parts, _ = sdk(capprovals.get_l1_parts, action_hash)
    need(parts.suspended_content == content, "get_l1_parts: suspended_content differs")
    need(parts.approver_pubkey == pub(approver), f"get_l1_parts: {parts}")
    need(parts.record == attach.sent["record"], "get_l1_parts: record not verbatim")
    use(STATE["app"])
    mark = len(EXCHANGES)
    try:
        heso.finalize_l1(action_hash, parts.suspended_content, parts)
    except Exception as exc:
        raise Fail(f"heso.finalize_l1: {exc}; {EXCHANGES[mark:]}") from None
    (push,) = EXCHANGES[mark:]
    need(push.sent.get("supersedes_action_hash") == action_hash, f"finalize sent {push.sent}")
    need(
        push.status == 201 and push.answer.get("trust_level") == "L1",
        f"finalize_l1's push: {push}",
    )
    STATE["interop_single"] = {"suspended": receipt, "l1": push.sent["receipt"]}
    return (
        f"revoked key 403; submit_token (no leg) -> approved 1/1; assembly 409 ({detail!r}); "
        f"leg attached -> 200; other vote 409; get_l1_parts + heso.finalize_l1 -> 201 L1 "
        f"seq {push.answer.get('seq')} superseding {action_hash[:12]}"
    )


def flow_quorum() -> str:
    need("roster" in STATE, "needs the register flow")
    _, receipt = suspend_payment("quorum")
    content = receipt["content"]
    action_hash = content["action_hash"]
    rule = content["policy"]["rule_id"]
    roster = STATE["roster"]
    push_new(receipt)
    view, ex = sdk(capprovals.open_approval, action_hash, rule_id=rule, threshold=2)
    need(ex.status == 201 and view.threshold == 2 and view.status == "pending", f"open: {ex}")
    first = APPROVERS[ROTATED_KEY_ID]  # the key rotated in by the register flow
    second = APPROVERS["sdk-check-approver-2"]
    vote1 = raw_http(
        "POST",
        f"/v1/approvals/{action_hash}/submit-token",
        leg_vote(first, content, 2, roster),
    )
    need(
        vote1.status == 200 and view_of(vote1) == "pending 1/2",
        f"first vote with its quorum leg (roster {roster}): {vote1}",
    )
    view, ex = sdk(
        capprovals.submit_token,
        action_hash,
        token(second, content, rule),
        content,
        required_scope=rule,
    )
    need(view.status == "approved" and view.approved_count == 2, f"second vote: {ex}")
    detail = assembly_missing_legs(action_hash, 1)
    attach = raw_http(
        "POST", f"/v1/approvals/{action_hash}/submit-token", leg_vote(second, content, 2, roster)
    )
    need(attach.status == 200 and view_of(attach) == "approved 2/2", f"leg attached: {attach}")
    third = sdk_refused(
        capprovals.submit_token,
        action_hash,
        token(APPROVERS["sdk-check-approver-1"], content, rule),
        content,
    )
    need(third.status == 409, f"third vote on the resolved approval: {third}")
    parts, ex = sdk(capprovals.get_quorum_parts, action_hash)
    need(parts.threshold == 2 and parts.roster == roster, f"get_quorum_parts: {ex}")
    need(
        sorted(leg.record for leg in parts.legs)
        == sorted([vote1.sent["record"], attach.sent["record"]]),
        f"get_quorum_parts legs: {ex}",
    )
    use(STATE["app"])
    mark = len(EXCHANGES)
    try:
        heso.finalize_quorum(
            action_hash, parts.suspended_content, parts, loaded_operator_pubkey_b64=OPERATOR_PUB
        )
    except Exception as exc:
        raise Fail(f"heso.finalize_quorum: {exc}; {EXCHANGES[mark:]}") from None
    (push,) = EXCHANGES[mark:]
    need(
        push.status == 201
        and push.answer.get("trust_level") == "L1"
        and push.sent.get("supersedes_action_hash") == action_hash,
        f"finalize_quorum's push: {push}",
    )
    STATE["interop_quorum"] = {
        "suspended": receipt,
        "l1": push.sent["receipt"],
        "threshold": 2,
        "roster": parts.roster,
    }
    return (
        f"2-of-3 over {len(roster)} keys: leg vote pending 1/2, SDK vote approved 2/2, "
        f"assembly 409 ({detail!r}), leg attached, third vote 409; get_quorum_parts + "
        f"heso.finalize_quorum -> 201 L1 seq {push.answer.get('seq')}"
    )


def flow_threshold_above_roster() -> str:
    need("roster" in STATE, "needs the register flow")
    _, receipt = suspend_payment("threshold")
    content = receipt["content"]
    action_hash = content["action_hash"]
    push_new(receipt)
    threshold = len(STATE["roster"]) + 1
    view, ex = sdk(capprovals.open_approval, action_hash, threshold=threshold)
    need(
        ex.status == 201 and view.status == "pending" and view.threshold == threshold,
        f"open_approval(threshold={threshold}) with {len(STATE['roster'])} approver keys: {ex} "
        "(server.md §6: opening never fails for want of approvers)",
    )
    signer = APPROVERS["sdk-check-approver-1"]
    refused = sdk_refused(
        capprovals.submit_token,
        action_hash,
        token(signer, content, content["policy"]["rule_id"]),
        content,
    )
    detail = str(refused.answer.get("detail", "")) if isinstance(refused.answer, dict) else ""
    need(
        refused.status == 409 and str(threshold) in detail and str(threshold - 1) in detail,
        f"first vote with fewer eligible keys than the threshold: {refused} (server.md §6: "
        "409 naming both numbers)",
    )
    return f"open threshold {threshold} -> 201 pending; first vote -> 409 ({detail!r})"


def flow_ticket() -> str:
    need("roster" in STATE, "needs the register flow")
    os.environ["HESO_CONSOLE_URL"] = BASE
    try:
        ticket, receipt = suspend_payment("ticket")
    finally:
        os.environ.pop("HESO_CONSOLE_URL")
    content = receipt["content"]
    content_hash = content["action_hash"]
    formula = str(core.blake3_hash(canonical(dict(content, agent_identity="", action_hash=""))))
    need(ticket != content_hash, "SuspendedError.action_hash is the content hash here?")
    need(ticket == formula, f"ticket {ticket} is not the server.md §6 formula ({formula})")
    message = STATE["last_suspend_message"]
    need(f"{BASE}/approvals (action {ticket})" in message, f"SuspendedError: {message!r}")
    approver = APPROVERS["sdk-check-approver-1"]
    opened, ex = sdk(capprovals.open_approval, ticket)  # by the ticket, before the receipt
    need(ex.status == 201 and opened.status == "pending", f"open_approval(ticket): {ex}")
    push_new(receipt)
    by_ticket, ex_t = sdk(capprovals.poll_approval, ticket)
    _, ex_c = sdk(capprovals.poll_approval, content_hash)
    need(
        ex_t.answer.get("approval_id") == ex_c.answer.get("approval_id")
        and by_ticket.status == "pending",
        f"poll by ticket / by content hash reach different approvals: {ex_t} / {ex_c}",
    )
    again, ex = sdk(capprovals.open_approval, content_hash)
    need(ex.status == 200 and again.approval_id == ex_c.answer["approval_id"], f"re-open: {ex}")
    rule = content["policy"]["rule_id"]
    view, ex = sdk(capprovals.submit_token, ticket, token(approver, content, rule), content)
    need(view.status == "approved", f"submit_token(ticket) without a leg: {ex}")
    assembly_missing_legs(ticket, 1)
    attach = raw_http(
        "POST", f"/v1/approvals/{ticket}/submit-token", leg_vote(approver, content, 1, [])
    )
    need(attach.status == 200, f"leg attached by ticket: {attach}")
    parts, _ = sdk(capprovals.get_l1_parts, ticket)
    need(parts.suspended_content == content, "get_l1_parts(ticket): another suspended content")
    use(STATE["app"])
    mark = len(EXCHANGES)
    try:
        heso.finalize_l1(parts.suspended_content["action_hash"], parts.suspended_content, parts)
    except Exception as exc:
        raise Fail(f"heso.finalize_l1: {exc}; {EXCHANGES[mark:]}") from None
    (push,) = EXCHANGES[mark:]
    need(push.status == 201 and push.answer.get("trust_level") == "L1", f"finalize: {push}")
    polled, ex = sdk(capprovals.poll_approval, ticket)
    need(polled.status == "approved", f"poll_approval(ticket) after finalize: {ex}")
    merged = ex.answer.get("approval_id")
    kept = "kept" if merged == opened.approval_id else f"merged into {merged}"
    return (
        f"ticket {ticket[:12]} (formula holds) != content {content_hash[:12]}; open(ticket) 201 "
        f"before the push ({opened.approval_id}, {kept}); poll(ticket) == poll(content); "
        f"re-open(content) 200; submit_token/leg/get_l1_parts by ticket; finalize_l1 -> 201 L1"
    )


def console_url() -> str:
    url = f"{BASE}/approvals"
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        with opener.open(url, timeout=10) as resp:
            status, where = resp.status, ""
    except urllib.error.HTTPError as exc:
        status, where = exc.code, exc.headers.get("Location", "")
    need(
        status == 200 or (300 <= status < 400 and where),
        f"GET {url} (what the SDK prints with HESO_CONSOLE_URL={BASE}) -> {status} "
        "(server.md §6: leads to the org's approval queue)",
    )
    return f"GET {url} -> {status}{' ' + where if where else ''}"


def gated_session(name: str, decision_seed: bytes | None, expected: str) -> str:
    need(expected == "L0" or "roster" in STATE, "needs the register flow")
    root = project(name, decision_seed)
    insecure = decision_seed is None
    if insecure:
        os.environ[INSECURE_ENV] = "1"
    try:
        use(root)
        session = f"sdk-check-{name}-{RUN}"
        amount = 1000 + secrets.randbelow(9000)
        calls = [gated_wire_transfer(amount, "USD", f"Payee {RUN}", _heso_session=session)]
        heso.append_decision(session, "approved", reason=f"sdk check {RUN}")
        calls.append(gated_wire_transfer(amount, "USD", f"Payee {RUN}", _heso_session=session))
        note = _suspend.load_note(require_config(), session)
        need(note is not None, f"no session note for {session}")
        lines = Path(note.chain_path).read_text(encoding="utf-8").splitlines()
    finally:
        os.environ.pop(INSECURE_ENV, None)
    chain = [json.loads(line) for line in lines if line.strip()]
    kinds = [r["content"].get("kind") for r in chain]
    need(kinds == ["suspended", "approved", "completed"], f"local chain kinds {kinds}; {calls}")
    seen = []
    for r in chain:
        c = r["content"]
        ex = push_new(r)
        derived = expected if c["kind"] == "approved" else "L0"
        claim = ex.answer.get("claimed_trust_level")
        need(
            ex.answer.get("trust_level") == derived
            and claim == (c["trust_level"] if c["trust_level"] != derived else None),
            f"{c['kind']} link claiming {c['trust_level']}: {ex} (server.md §1: derived "
            f"{derived}, claimed_trust_level only where the claim differs)",
        )
        seen.append(f"{c['kind']} {derived}" + (f" (claimed {claim})" if claim else ""))
    return ", ".join(seen)


def flow_gated_unregistered() -> str:
    return "decision key not an approver key: " + gated_session(
        "gated-unregistered", secrets.token_bytes(32), "L0"
    )


def flow_gated_registered() -> str:
    return "decision key = approver-1: " + gated_session(
        "gated-registered", APPROVER_SEEDS["sdk-check-approver-1"], "L1"
    )


def flow_gated_placeholder() -> str:
    return f"placeholder key ({INSECURE_ENV}=1): " + gated_session("gated-placeholder", None, "L0")


FLOWS: list[tuple[str, Callable[[], str]]] = [
    ("pull", flow_pull),
    ("push", flow_push),
    ("open-without-approver-keys", flow_open_without_keys),
    ("register-approver-pubkey", flow_register),
    ("single-approver", flow_single),
    ("quorum-2-of-3", flow_quorum),
    ("threshold-above-roster", flow_threshold_above_roster),
    ("suspend-ticket", flow_ticket),
    ("console-url", console_url),
    ("gated-unregistered-decision-key", flow_gated_unregistered),
    ("gated-registered-decision-key", flow_gated_registered),
    ("gated-placeholder-decision-key", flow_gated_placeholder),
]


def main() -> int:
    if sys.argv[1:] == ["policy"]:
        sys.stdout.write(CHECK_POLICY)
        return 0
    if sys.argv[1:]:
        raise SystemExit(__doc__)
    if not KEY:
        raise SystemExit("MIRROR_API_KEY is not set")
    cclient.configure(api_key=KEY, endpoint=BASE)
    failures = 0
    for name, flow in FLOWS:
        try:
            print(f"ok {name}: {flow()}", flush=True)
        except Fail as exc:
            failures += 1
            print(f"FAIL {name}: {exc}", flush=True)
        except Exception as exc:  # a crash is that flow's failure
            failures += 1
            print(f"FAIL {name}: {type(exc).__name__}: {exc}", flush=True)
    out = os.environ.get("MIRROR_INTEROP_OUT")
    if out and "interop_single" in STATE and "interop_quorum" in STATE:
        Path(out).write_text(
            json.dumps(
                {
                    "generator": "heso 0.5.1 heso.finalize_l1 / finalize_quorum against the "
                    "service, deploy/interop/heso_sdk_check.py",
                    "single": STATE["interop_single"],
                    "quorum": STATE["interop_quorum"],
                },
                indent=1,
            )
            + "\n",
            encoding="utf-8",
        )
    print(f"{len(FLOWS) - failures}/{len(FLOWS)} flows ok (run {RUN}, work {WORK})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
