"""Mint tests/data/sdk/corpus.json with the real heso SDK's own engine (never a dependency).

    python3 -m venv /tmp/hesovenv
    /tmp/hesovenv/bin/pip install heso==0.5.1 pynacl rfc8785 blake3
    /tmp/hesovenv/bin/python deploy/interop/make_sdk_corpus.py [OUT]

No server is needed. The script scaffolds throwaway heso projects (heso.toml + a fixed
operator seed, and for most sessions a fixed decision key) under $HESO_CORPUS_WORK
(default: <tmpdir>/corpus-work, never inside this repository) and drives the SDK's public
surfaces there: the decorators, heso.wrap, heso.mcp.wrap_call_tool, heso.process,
@heso.gated + heso.append_decision, the heso-mcp gate, heso.cloud.* and
heso.finalize_l1 / finalize_quorum. Two taps record what the SDK produces without changing
it: heso._core.process is wrapped to keep the engine's raw output (a suspension's receipt
never reaches the caller otherwise), and heso.cloud.client.urlopen is replaced by an
in-process fake so every HTTP request the SDK would send is recorded and answered in the
documented shapes. Receipt contents are deterministic except for what the engine draws
at random (commit-and-reveal salts, resume tokens): clock, keys and token nonces are
fixed. OUT defaults to tests/data/sdk/corpus.json.
"""

import asyncio
import base64
import dataclasses
import hashlib
import importlib.metadata
import json
import os
import shutil
import struct
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar, cast

import blake3
import heso
import heso._core as core
import rfc8785
from heso import _capture, _suspend
from heso._mcp_proxy import ToolCallGate
from heso._runtime import require_config
from heso.cloud import approvals as capprovals
from heso.cloud import client as cclient
from heso.cloud import outbox
from nacl.exceptions import BadSignatureError
from nacl.signing import SigningKey, VerifyKey

REPO = Path(__file__).resolve().parents[2]
OUT = Path(sys.argv[1]) if sys.argv[1:] else REPO / "tests" / "data" / "sdk" / "corpus.json"
WORK = Path(os.environ.get("HESO_CORPUS_WORK") or Path(tempfile.gettempdir()) / "corpus-work")
if WORK.resolve() == REPO or REPO in WORK.resolve().parents:
    raise SystemExit("HESO_CORPUS_WORK must be outside the repository")

CLOCK = "2026-11-22T10:00:00Z"
ENDPOINT = "http://mirror.invalid"
TOKEN_EXPIRY = 4102444800  # 2100-01-01T00:00:00Z
TOKEN_NOW = 1795341600  # 2026-11-22T10:00:00Z, the clock the tokens were checked at
OPERATOR_SEED = bytes([5]) * 32
OTHER_OPERATOR_SEED = bytes([6]) * 32  # only for the ticket-collision case
DECISION_SEED = bytes([21]) * 32
PLACEHOLDER_SEED = bytes([7]) * 32  # the wheel's HESO_ALLOW_INSECURE_LOCAL_DECISION_KEY key
APPROVER_SEEDS = [bytes([i]) * 32 for i in (11, 12, 13)]  # 11 and 12 as in heso_sdk_check.py
INSECURE_ENV = "HESO_ALLOW_INSECURE_LOCAL_DECISION_KEY"

POLICY = """\
# heso policy for the SDK corpus: first matching rule (by order) wins.

[[rule]]
id = "llm.allow"
order = 10
enabled = true
subject = { kind = "any" }
verb = "llm_call"
scope = "*"
decision = "allow"

[[rule]]
id = "tool.prod.requires_approval"
order = 15
enabled = true
subject = { kind = "any" }
verb = "tool_call"
scope = "*"
decision = "require_approval"
approvers = ["Release Manager"]
sla_minutes = 60
conditions = [{ field = "env", op = "eq", value = "prod", display = "env is prod" }]

[[rule]]
id = "tool.allow"
order = 20
enabled = true
subject = { kind = "any" }
verb = "tool_call"
scope = "*"
decision = "allow"

[[rule]]
id = "http.status.allow"
order = 25
enabled = true
subject = { kind = "any" }
verb = "http_request"
scope = "status.example.com"
decision = "allow"

[[rule]]
id = "delete.requires_approval"
order = 30
enabled = true
subject = { kind = "any" }
verb = "delete"
scope = "*"
decision = "require_approval"
approvers = ["Security Admin"]
sla_minutes = 30

[[rule]]
id = "payment.large.requires_approval"
order = 40
enabled = true
subject = { kind = "any" }
verb = "payment"
scope = "*"
decision = "require_approval"
approvers = ["Finance"]
sla_minutes = 30
conditions = [{ field = "amount", op = "gt", value = 1000, display = "amount > 1,000" }]

[[rule]]
id = "export.requires_approval"
order = 50
enabled = true
subject = { kind = "any" }
verb = "data_export"
scope = "*"
decision = "require_approval"
approvers = ["Data Protection"]
"""

KIND_DOMAIN = {
    "action": b"heso-action/v1\x00",
    "completed": b"heso-action/v1\x00",
    "suspended": b"heso-action-suspend/v1\x00",
    "approved": b"heso-action-decision/v1\x00",
    "denied": b"heso-action-decision/v1\x00",
    "expired": b"heso-action-decision/v1\x00",
    "escalated": b"heso-action-decision/v1\x00",
}
DECISION_KINDS = {"approved", "denied", "expired", "escalated"}


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def pub_of(seed: bytes) -> str:
    return b64(bytes(SigningKey(seed).verify_key))


OPERATOR_PUB = pub_of(OPERATOR_SEED)
DECISION_PUB = pub_of(DECISION_SEED)
PLACEHOLDER_PUB = pub_of(PLACEHOLDER_SEED)
assert PLACEHOLDER_PUB == "6kpsY+KcUgq+9VB7Ey7F+ZVHdq6+vnuSQh7qaRRG0iw="


# --- tap 1: the engine's raw ProcessOutput (drive() keeps only the ticket of a suspension)
TAP: list[dict[str, Any]] = []
_engine_process = core.process


def _tapped_process(payload: bytes, project_root: str) -> bytes:
    out: bytes = _engine_process(payload, project_root)
    TAP.append(json.loads(out))
    return out


core.process = _tapped_process


# --- tap 2: an in-process stand-in for the mirror; records every request the SDK sends
HTTP_LOG: list[dict[str, Any]] = []
ASSEMBLY: dict[str, dict[str, Any]] = {}
VIEWS: dict[str, dict[str, Any]] = {}


class _Response:
    def __init__(self, body: dict[str, Any]) -> None:
        self._raw = json.dumps(body).encode()

    def __enter__(self) -> "_Response":
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def read(self) -> bytes:
        return self._raw


def _view(action_hash: str) -> dict[str, Any]:
    return VIEWS.setdefault(
        action_hash,
        {
            "approval_id": "apr_" + action_hash[:12],
            "action_hash": action_hash,
            "status": "pending",
            "threshold": 1,
            "approved_count": 0,
            "resolved_at": None,
        },
    )


def _fake_urlopen(req: Any, timeout: float = 10.0) -> _Response:
    path = req.full_url[len(ENDPOINT) :]
    body: Any = json.loads(req.data) if req.data else None
    headers = {k.lower(): v for k, v in req.header_items()}
    headers["x-api-key"] = "<api key>"
    HTTP_LOG.append({"method": req.get_method(), "path": path, "headers": headers, "body": body})
    if path == "/v1/receipts":
        return _Response({"status": "appended", "entry_hash": "0" * 64, "seq": len(HTTP_LOG)})
    if path == "/v1/approvals":
        view = _view(body["action_hash"])
        view["threshold"] = body["threshold"]
        return _Response(view)
    action_hash = path.split("/")[3]
    if path.endswith("/assembly"):
        return _Response(ASSEMBLY[action_hash])
    if path.endswith("/submit-token"):
        view = _view(action_hash)
        view["approved_count"] += 1
        if view["approved_count"] >= view["threshold"]:
            view.update(status="approved", resolved_at="2026-11-22T10:05:00Z")
        return _Response(view)
    return _Response(_view(action_hash))


cclient.urlopen = _fake_urlopen


# --- helpers


def make_project(name: str, decision_seed: bytes | None, seed: bytes = OPERATOR_SEED) -> Path:
    root = WORK / name
    if root.exists():
        shutil.rmtree(root)
    (root / "heso-local-data").mkdir(parents=True)
    (root / "heso.toml").write_text(POLICY, encoding="utf-8")
    (root / "heso-local-data" / "identity.key").write_bytes(seed)
    if decision_seed is not None:
        (root / "heso-local-data" / "decision.key").write_bytes(decision_seed)
    return root


def canonical(content: dict[str, Any]) -> bytes:
    return bytes(core.action_canonical_bytes(json.dumps(content).encode()))


def ticket_formula(content: dict[str, Any]) -> str:
    """server.md §6: T = hex(BLAKE3(JCS(content without action_hash, agent_identity "")))."""
    stripped = dict(content, agent_identity="", action_hash="")  # action_hash is dropped
    return str(core.blake3_hash(canonical(stripped)))


def _floats(value: Any) -> Any:
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, list):
        return [_floats(v) for v in value]
    return {k: _floats(v) for k, v in value.items()}


def ticket_clean_room(content: dict[str, Any]) -> str:
    """The same formula without the SDK: rfc8785 + blake3, every number as a double."""
    stripped = {k: v for k, v in content.items() if k != "action_hash"}
    stripped["agent_identity"] = ""
    return str(blake3.blake3(rfc8785.dumps(_floats(stripped))).hexdigest())


def kind_signer(receipt: dict[str, Any]) -> str | None:
    """receipts.md §12 step 2: the first entry that verifies under the kind's domain."""
    content = receipt["content"]
    if "multi_approval" in content:  # the operator signs the quorum base (receipts.md §6)
        base = dict(content["multi_approval"], approvers=[])
        content = dict(content, multi_approval=base)
    message = KIND_DOMAIN[content.get("kind", "action")] + canonical(content)
    for entry in receipt["signatures"]:
        try:
            key = VerifyKey(base64.b64decode(entry["public_key"]))
            key.verify(message, base64.b64decode(entry["signature"]))
        except (BadSignatureError, ValueError):
            continue
        return str(entry["public_key"])
    return None


def verdicts(receipt: dict[str, Any]) -> dict[str, Any]:
    raw = json.dumps(receipt).encode()
    return {
        "verify_action_receipt": core.verify_action_receipt(raw),
        "verify_lifecycle_receipt": core.verify_lifecycle_receipt(raw),
    }


def note(receipt: dict[str, Any], push: str = "plain") -> dict[str, Any]:
    content = receipt["content"]
    kind = content.get("kind", "action")
    signer = kind_signer(receipt)
    out: dict[str, Any] = {
        "action_hash": content["action_hash"],
        "kind": kind,
        "claimed_trust_level": content["trust_level"],
        "decision_path": content["policy"]["decision_path"],
        "signed_by": signer,
        "decision_signer": None,
        "push": push,
        **verdicts(receipt),
    }
    if "session_id" in content:
        out["session_id"] = content["session_id"]
        out["seq"] = content["seq"]
        out["link_hash"] = str(core.link_hash(json.dumps(content).encode()))
    if kind in DECISION_KINDS:
        out["decision_signer"] = signer
        registered = "L1" if signer not in (PLACEHOLDER_PUB, OPERATOR_PUB) else "L0"
        out["server_trust_level_if_signer_registered"] = registered
        out["server_trust_level_if_signer_not_registered"] = "L0"
    elif kind == "action":
        approvers = [s["public_key"] for s in receipt["signatures"] if s["key_id"] == "approver"]
        out["approver_signers"] = approvers
        if "approver_decision" in content:
            out["decision_signer"] = approvers[0]
        out["server_trust_level"] = out["verify_action_receipt"].get("trust_level")
    else:
        out["server_trust_level"] = "L0"
    return out


def flow(name: str, summary: str, receipts: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    notes: dict[str, Any] = {
        "summary": summary,
        "per_receipt": [note(r) for r in receipts],
        **extra,
    }
    chained = [r for r in receipts if "session_id" in r["content"]]
    if len(chained) > 1:
        raw = json.dumps(chained).encode()
        notes["verify_session_chain"] = core.verify_session_chain(raw)
        if all("kind" not in r["content"] for r in chained):
            notes["verify_action_receipt_chain"] = core.verify_action_receipt_chain(raw)
    for r, n in zip(receipts, notes["per_receipt"], strict=True):
        lifecycle = n["kind"] != "action"
        good = (n["verify_lifecycle_receipt"] if lifecycle else n["verify_action_receipt"])["kind"]
        assert good == "Valid", (name, n)
        assert r["content"]["agent_identity"] in (OPERATOR_PUB, ""), r
        assert all(
            s["public_key"] != PLACEHOLDER_PUB or "placeholder" in name for s in r["signatures"]
        )
    return {"name": name, "receipts": receipts, "notes": notes}


def engine_outputs(since: int, status: str | None = None) -> list[dict[str, Any]]:
    outs = TAP[since:]
    if status is not None:
        assert all(o["status"] == status for o in outs), outs
    return outs


def suspend_via(call: Any) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """Run a decorated call that must suspend: (SuspendedError.action_hash, receipt, ticket)."""
    mark = len(TAP)
    try:
        call()
    except heso.SuspendedError as exc:
        (out,) = engine_outputs(mark, "suspended")
        return str(exc.action_hash), out["receipt"], out["ticket"]
    raise AssertionError("expected a suspension")


def token(signer: SigningKey, content: dict[str, Any], scope: str, label: str) -> str:
    """Approval token, approvals.md §1-§2 (as heso_sdk_check.py builds it), fixed nonce."""
    nonce = hashlib.sha256(b"heso-corpus-nonce:" + label.encode()).digest()
    s = scope.encode()
    fields = nonce + struct.pack(">Q", TOKEN_EXPIRY) + b"\x01" + struct.pack(">I", len(s)) + s
    sig = signer.sign(b"heso-approval-token/v1\x00" + fields + canonical(content)).signature
    return b64(fields + sig + bytes(signer.verify_key))


def checked_token(
    signer: SigningKey, content: dict[str, Any], scope: str, label: str
) -> dict[str, Any]:
    tok = token(signer, content, scope, label)
    claims = core.verify_approval_token(
        base64.b64decode(tok),
        canonical(content),
        TOKEN_NOW,
        [],
        scope,
        "approved",
        [b64(bytes(signer.verify_key))],
    )
    return {
        "token_b64": tok,
        "scope": scope,
        "expiry_unix_secs": TOKEN_EXPIRY,
        "nonce_hex": bytes(claims["nonce"]).hex(),
        "verify_approval_token": {k: v for k, v in claims.items() if k != "nonce"},
    }


def record_text(pub: str, reason: str) -> str:
    record = {
        "decision": "approved",
        "approver_identity": pub,
        "reason": reason,
        "decided_at": "2026-11-22T10:05:00Z",
    }
    return json.dumps(record, ensure_ascii=False)


def read_chain(session: str) -> list[dict[str, Any]]:
    saved = _suspend.load_note(require_config(), session)
    assert saved is not None
    lines = Path(saved.chain_path).read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


# --- fake clients for heso.wrap (no network: the gate runs before the call)


class _Completions:
    def create(self, **kwargs: Any) -> dict[str, Any]:
        return {"id": "cmpl-corpus", "choices": [{"message": {"content": "ok"}}]}


class _Chat:
    def __init__(self) -> None:
        self.completions = _Completions()


class FakeOpenAI:
    def __init__(self) -> None:
        self.chat = _Chat()


class FakeHttpSession:
    def request(self, method: str, url: str, **kwargs: Any) -> dict[str, Any]:
        return {"status": 201}


# --- decorated agent functions (heso is untyped: `typed` keeps mypy's view of each one)

F = TypeVar("F", bound=Callable[..., Any])


def typed(decorator: Any) -> Callable[[F], F]:
    def apply(fn: F) -> F:
        return cast(F, decorator(fn))

    return apply


def loose(decorator: Any) -> Callable[[Callable[..., Any]], Any]:
    return cast(Callable[[Callable[..., Any]], Any], decorator)


@typed(heso.tool)
def search_filings(query: str, limit: int = 10) -> list[str]:
    return ["10-K"]


@typed(heso.tool(redact=["api_key"]))
def call_partner_api(api_key: str, body: str) -> str:
    return "ok"


@typed(heso.tool)
def lookup_customer(name: str, ssn: str) -> str:
    return "found"


@typed(heso.tool)
def run_migration(env: str, plan: dict[str, Any], batch: int) -> str:
    return "migrated"


@typed(heso.tool(redact=["api_key"]))
def deploy_with_key(service: str, env: str, api_key: str) -> str:
    return "deployed"


@typed(heso.tool)
def deploy_service(service: str, env: str, replicas: int = 2) -> str:
    return "deployed"


@typed(heso.action("payment.authorize_payment"))
def charge_card(amount: float, currency: str, payee: str) -> str:
    return "charged"


@typed(heso.action("payment.refund_payment"))
def refund(amount: float, currency: str, payee: str, reason: str) -> str:
    return "refunded"


@typed(heso.destructive)
def drop_table(name: str, cascade: bool = False) -> None:
    return None


@typed(heso.destructive)
def purge_bucket(bucket: str, token: str) -> None:
    return None


@typed(heso.action("data.export"))
def export_rows(table: str, filters: dict[str, Any], columns: list[str]) -> int:
    return 0


@typed(heso.action("iam.change_access"))
def grant_role(user: str, role: str) -> None:
    return None


@typed(heso.action("infra.infra_destroy"))
def destroy_cluster(name: str, region: str) -> None:
    return None


@loose(heso.gated(sla="2h", on_timeout="deny"))  # also takes _heso_session=
def wire_transfer(amount: int, currency: str, payee: str) -> dict[str, Any]:
    return {"transfer": "done", "amount": amount}


UPSTREAM_RESULT = {"content": [{"type": "text", "text": "4 °C, Nebel"}], "isError": False}
RESULT_TEXT = json.dumps(UPSTREAM_RESULT)  # what heso._capture.record_result hashes


async def upstream_tool(name: str, arguments: dict[str, Any] | None) -> dict[str, Any]:
    return UPSTREAM_RESULT


def init(root: Path, **kwargs: Any) -> None:
    heso.init(
        project_root=str(root),
        clock_override=CLOCK,
        workflow="corpus",
        account="acme-corp",
        **kwargs,
    )


# =========================================================================== run

app = make_project("app", DECISION_SEED)
insecure = make_project("insecure", None)
os.environ.pop(INSECURE_ENV, None)
os.environ.pop("HESO_CONSOLE_URL", None)
cclient.configure(api_key="hk_corpus", endpoint=ENDPOINT)
init(app)
flows: list[dict[str, Any]] = []

# --- 1. immediate actions -------------------------------------------------------
mark = len(TAP)
with heso.step(workflow="corpus-allow"):
    search_filings("10-K 2025 Acme — résumé, 東京 ✓", limit=5)
(allowed,) = engine_outputs(mark, "allowed")
flows.append(
    flow(
        "decorator_allow",
        "@heso.tool call allowed by rule tool.allow (non-ASCII query): one L0 receipt, "
        "chained as seq 0 of the workflow's session (the engine chains by workflow).",
        [allowed["receipt"]],
    )
)

mark = len(TAP)
with heso.step(workflow="corpus-redaction"):
    call_partner_api(api_key="sk-live-4242", body="hello")
    with heso.step(redact=["ssn"], redact_strategy=heso.RedactStrategy.DESTRUCTIVE):
        lookup_customer(name="Jane Roe", ssn="123-45-6789")
redacted = [o["receipt"] for o in engine_outputs(mark, "allowed")]
flows.append(
    flow(
        "redaction",
        "@heso.tool(redact=['api_key']) (commit_and_reveal marker, salted: the commitment "
        "changes on every run) then a heso.step(redact=['ssn'], DESTRUCTIVE) call (destructive "
        "markers: the engine also redacted `name` on its own); seq 0 and 1 of one session.",
        redacted,
    )
)

mark = len(TAP)
with heso.step(workflow="corpus-llm"):
    heso.wrap(FakeOpenAI()).chat.completions.create(
        model="gpt-4o-mini",
        messages=[{"role": "user", "content": "Résumé: naïve café — 東京 ✓"}],
        temperature=0.2,
        max_tokens=256,
    )
(llm,) = engine_outputs(mark, "allowed")
flows.append(
    flow(
        "llm_call",
        "heso.wrap(client).chat.completions.create(...): verb llm_call, domain/action "
        "model/llm_completion; the engine signs only `model` and `pii_status` in fields "
        "(messages, temperature, max_tokens are not in the receipt).",
        [llm["receipt"]],
    )
)

payment_tickets = []
mark = len(TAP)
with heso.step(workflow="corpus-payment"):
    for args in ((2500, "EUR", "ACME GmbH"), (40, "USD", "Corner Café")):
        hand, receipt, engine_ticket = suspend_via(lambda a=args: charge_card(*a))
        payment_tickets.append({"ticket": hand, "rule_id": engine_ticket["rule_id"]})
payments = [o["receipt"] for o in engine_outputs(mark, "suspended")]
flows.append(
    flow(
        "payment",
        "@heso.action('payment.authorize_payment') (2500 EUR: payment.large.requires_approval; "
        "40 USD: no rule matches, policy.default.deny_unknown). The Python SDK cannot attach a "
        "mandate to an action and the load-time floor only lets an allow rule for payments "
        "through with a mandate condition, so every payment suspends. These are the "
        "suspended L0 action receipts (no `kind`, no chain block; the engine keeps only "
        "amount/currency/payee in fields) from the engine's raw output; the SDK hands its "
        "user only the ticket hash (SuspendedError.action_hash), not content.action_hash.",
        payments,
        tickets=payment_tickets,
    )
)

mark = len(TAP)
with heso.step(workflow="corpus-mcp"):
    asyncio.run(heso.mcp.wrap_call_tool(upstream_tool)("get_weather", {"city": "Zürich"}))
bound = [o["receipt"] for o in engine_outputs(mark, "allowed")]
assert "result_hash" in bound[1]["content"]["action"]
flows.append(
    flow(
        "result_bound",
        "heso.mcp.wrap_call_tool: the gate receipt (mcp_proxy surface), then the follow-up "
        "receipt from heso._capture.record_result carrying action.result_hash = BLAKE3 of the "
        "JSON result; seq 0 and 1.",
        bound,
        result_hash_input=RESULT_TEXT,
    )
)
assert bound[1]["content"]["action"]["result_hash"] == core.blake3_hash(RESULT_TEXT.encode())

mark = len(TAP)
with heso.step(workflow="corpus-error"):
    gated_action = _capture.gate("fetch_invoice", {"invoice_id": "INV-2026-0042"})
    heso.process(
        dataclasses.replace(gated_action, error="TimeoutError: upstream did not answer within 30s")
    )
errors = [o["receipt"] for o in engine_outputs(mark, "allowed")]
assert "error" in errors[1]["content"]["action"]
flows.append(
    flow(
        "error",
        "heso._capture.gate (the adapters' core) then heso.process of the same Action with "
        "`error` set (no adapter sets it; heso.process is the SDK's public imperative entry): "
        "the second receipt carries action.error.",
        errors,
    )
)

mark = len(TAP)
with heso.step(workflow="corpus-session"):
    search_filings("quarterly revenue", limit=3)
    heso.wrap(FakeOpenAI()).chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "summarise"}]
    )
    call_partner_api(api_key="sk-test-1", body='{"q": 1}')
    asyncio.run(heso.mcp.wrap_call_tool(upstream_tool)("get_weather", {"city": "Oslo"}))
    heso.wrap(FakeHttpSession()).request("GET", "https://status.example.com/v1/health")
session = [o["receipt"] for o in TAP[mark:] if o["status"] == "allowed"]
flows.append(
    flow(
        "chained_session",
        "Six allowed actions in one workflow (tool, llm, redacted tool, MCP gate + result, "
        "http GET): session_id 'corpus-session', seq 0..5, each prev_receipt_hash = link hash "
        "of the previous content (receipts.md §13.1).",
        session,
        other_engine_outputs=[o["status"] for o in TAP[mark:] if o["status"] != "allowed"],
    )
)
assert HTTP_LOG == [], HTTP_LOG  # cloud configured, yet nothing above was pushed

# --- 2. heso.gated sessions -------------------------------------------------------


def gated_session(session: str, decision: str | None, amount: int, payee: str) -> dict[str, Any]:
    steps = [repr(wire_transfer(amount, "USD", payee, _heso_session=session))]
    saved = _suspend.load_note(require_config(), session)
    assert saved is not None
    if decision == "expired":
        steps.append(
            core.process_sweep(str(require_config().project_root), session, "2026-11-23T00:00:00Z")
        )
    elif decision is not None:
        heso.append_decision(session, decision, reason=f"corpus: {decision} by the approver")
    steps.append(repr(wire_transfer(amount, "USD", payee, _heso_session=session)))
    steps.append(repr(wire_transfer(amount, "USD", payee, _heso_session=session)))
    return {
        "session_id": session,
        "calls": steps,
        "head": heso.decision(session),
        "action_spec": saved.action_spec,
        "chain": read_chain(session),
    }


http_before = len(HTTP_LOG)
gated_flows = [
    ("gated_approved", "approved", 2500, "Acme Supplies"),
    ("gated_denied", "denied", 9100, "Unknown Payee Ltd"),
    ("gated_expired", "expired", 1200, "Late Vendor"),
]
for name, decision, amount, payee in gated_flows:
    run = gated_session(f"corpus-{name}", decision, amount, payee)
    flows.append(
        flow(
            name,
            f"@heso.gated(sla='2h', on_timeout='deny') with the CONFIGURED decision key "
            f"(heso-local-data/decision.key = decision_key.configured.seed_hex); decision "
            f"'{decision}' "
            + (
                "via heso._core.process_sweep past expires_at (what a sweeper does)"
                if decision == "expired"
                else "via heso.append_decision"
            )
            + ". Receipts = the session's local chain file, in order; the SDK pushes none "
            "of them (no HTTP at all), a client pushes them itself.",
            run.pop("chain"),
            gated=run,
        )
    )

init(insecure)
os.environ[INSECURE_ENV] = "1"
run = gated_session("corpus-gated-placeholder", "approved", 300, "Placeholder Co")
os.environ.pop(INSECURE_ENV)
flows.append(
    flow(
        "gated_placeholder_approved",
        "Same as gated_approved but with no decision.key and "
        "HESO_ALLOW_INSECURE_LOCAL_DECISION_KEY=1: the approved link is signed by the public "
        "placeholder key 6kpsY+... (seed [7u8;32]); server.md §6: never L1 on the mirror.",
        run.pop("chain"),
        gated=run,
    )
)
assert len(HTTP_LOG) == http_before, HTTP_LOG[http_before:]
init(app)

# --- 3. suspend tickets ------------------------------------------------------------
tickets: list[dict[str, Any]] = []


def add_ticket(
    source: str, hand: str, receipt: dict[str, Any], engine_ticket: dict[str, Any]
) -> None:
    content = receipt["content"]
    assert content["agent_identity"] == receipt["signatures"][0]["public_key"]
    formula = ticket_formula(content)
    clean = ticket_clean_room(content)
    tickets.append(
        {
            "source": source,
            "operator_public_key": content["agent_identity"],
            "ticket": hand,
            "engine_ticket": engine_ticket,
            "receipt": receipt,
            "formula_holds": hand == formula == engine_ticket["action_hash"] == clean,
            "clean_room_formula": clean,
            "verify_action_receipt": core.verify_action_receipt(json.dumps(receipt).encode()),
        }
    )


decorated_suspensions = [
    ("payment 1500 USD", lambda: charge_card(1500, "USD", "Globex")),
    ("payment 99999.99 JPY", lambda: charge_card(99999.99, "JPY", "株式会社テスト")),
    ("payment 2500.5 CHF", lambda: charge_card(2500.5, "CHF", "Café Zürich AG")),
    ("payment small (floor)", lambda: charge_card(12, "USD", "Vending")),
    ("payment same content again", lambda: charge_card(1500, "USD", "Globex")),
    ("refund", lambda: refund(75, "GBP", "Jane Roe", "damaged item")),
    ("delete table", lambda: drop_table("customers_2019")),
    (
        "tool on prod, nested + int above 2^53",
        lambda: run_migration(
            "prod",
            {
                "steps": ["add_column", {"column": "notes", "nullable": True}],
                "ratio": 0.25,
                "clé": "ü",
            },
            9007199254740993,
        ),
    ),
    ("delete, another tool", lambda: purge_bucket("logs-prod", "s3cr3t")),
    (
        "tool on prod with a commit-and-reveal redaction",
        lambda: deploy_with_key("payments", "prod", "sk-live-9999"),
    ),
    (
        "data export (the engine keeps no free-form fields for it)",
        lambda: export_rows(
            "patients",
            {"région": "Île-de-France", "since": "2025-01-01", "limit": 9007199254740993},
            ["id", "name", "dob"],
        ),
    ),
    ("account change", lambda: grant_role("mallory@example.com", "admin")),
    ("infra destroy", lambda: destroy_cluster("prod-eu-1", "eu-west-1")),
    ("tool on prod (conditions matched)", lambda: deploy_service("billing", "prod", 4)),
    ("tool on prod, emoji", lambda: deploy_service("chat 💬", "prod")),
    (
        "http POST via heso.wrap",
        lambda: heso.wrap(FakeHttpSession()).request(
            "POST", "https://api.example.com/v1/orders", json={"sku": "A-1", "qty": 3}
        ),
    ),
    (
        "http DELETE via heso.wrap",
        lambda: heso.wrap(FakeHttpSession()).request(
            "DELETE", "https://api.example.com/v1/users/42"
        ),
    ),
]
with heso.step(workflow="corpus-tickets"):
    for label, call in decorated_suspensions:
        hand, receipt, engine_ticket = suspend_via(call)
        add_ticket(f"SuspendedError.action_hash ({label})", hand, receipt, engine_ticket)
    with heso.step(workflow="corpus-tickets-other-account", account="globex"):
        hand, receipt, engine_ticket = suspend_via(lambda: drop_table("audit_log"))
        add_ticket("SuspendedError.action_hash (other account)", hand, receipt, engine_ticket)

# heso-mcp: a refused tools/call opens a hosted approval with the ticket hash.
mcp_gate = ToolCallGate(WORK / "app" / "heso-local-data" / "receipts", cloud_endpoint=ENDPOINT)
with heso.step(workflow="corpus-heso-mcp"):
    for i, arguments in enumerate(
        ({"service": "search", "env": "prod"}, {"service": "ledger", "env": "prod", "dry": False})
    ):
        mark, http_mark = len(TAP), len(HTTP_LOG)
        reply = mcp_gate.gate_request(
            {
                "jsonrpc": "2.0",
                "id": i + 1,
                "method": "tools/call",
                "params": {"name": "deploy", "arguments": arguments},
            }
        )
        (out,) = engine_outputs(mark, "suspended")
        (opened,) = HTTP_LOG[http_mark:]
        assert reply is not None
        assert opened["path"] == "/v1/approvals"
        add_ticket(
            "heso-mcp ToolCallGate -> heso.cloud.open_approval body.action_hash",
            opened["body"]["action_hash"],
            out["receipt"],
            out["ticket"],
        )
        tickets[-1]["open_approval_request"] = opened

# Observe-only (HESO_BLOCKING off): nothing raises; the engine ticket is all there is.
init(app, blocking=False)
with heso.step(workflow="corpus-observe"):
    for args in ((3000, "EUR", "Observe GmbH"), (5, "EUR", "Observe GmbH")):
        mark = len(TAP)
        charge_card(*args)
        (out,) = engine_outputs(mark, "suspended")
        add_ticket(
            "engine ticket, observe-only",
            out["ticket"]["action_hash"],
            out["receipt"],
            out["ticket"],
        )
# A second operator suspending the very same action: same ticket, another content hash
# (server.md §6: T does not cover the operator key).
other = make_project("app-other-operator", DECISION_SEED, OTHER_OPERATOR_SEED)
init(other)
with heso.step(workflow="corpus-tickets"):
    hand, receipt, engine_ticket = suspend_via(lambda: charge_card(1500, "USD", "Globex"))
add_ticket(
    "SuspendedError.action_hash (second operator, same action)", hand, receipt, engine_ticket
)
assert hand == tickets[0]["ticket"]
assert receipt["content"]["action_hash"] != tickets[0]["receipt"]["content"]["action_hash"]
init(app)

console_messages = {}
try:
    charge_card(4999, "USD", "Console Co")
except heso.SuspendedError as exc:
    console_messages["cloud configured, HESO_CONSOLE_URL unset"] = str(exc)
os.environ["HESO_CONSOLE_URL"] = "https://mirror.example.org/console/"
try:
    charge_card(4999, "USD", "Console Co")
except heso.SuspendedError as exc:
    console_messages["HESO_CONSOLE_URL=https://mirror.example.org/console/"] = str(exc)
os.environ.pop("HESO_CONSOLE_URL")

# --- 4. L1 finalizations with the SDK's own assemblers ------------------------------
approvers = [SigningKey(seed) for seed in APPROVER_SEEDS]
approver_pubs = [b64(bytes(a.verify_key)) for a in approvers]


def finalize(
    label: str, call: Any, threshold: int, voters: list[int], reasons: list[str]
) -> dict[str, Any]:
    with heso.step(workflow=f"corpus-l1-{label}"):
        hand, suspended, _ = suspend_via(call)
    content = suspended["content"]
    action_hash = content["action_hash"]
    scope = content["policy"]["rule_id"]
    roster = sorted(approver_pubs) if threshold > 1 else [approver_pubs[voters[0]]]
    http_mark = len(HTTP_LOG)
    outbox.push_receipt(suspended)
    capprovals.open_approval(action_hash, rule_id=scope, threshold=threshold)
    votes = []
    for i, reason in zip(voters, reasons, strict=True):
        tok = checked_token(approvers[i], content, scope, f"{label}-{i}")
        rec = record_text(approver_pubs[i], reason)
        if threshold == 1:
            payload = core.l1_cosign_payload(json.dumps(content).encode(), rec.encode())
        else:
            payload = core.quorum_cosign_payload(
                json.dumps(content).encode(), threshold, json.dumps(roster).encode(), rec.encode()
            )
        co_sig = b64(approvers[i].sign(bytes(payload)).signature)
        capprovals.submit_token(action_hash, tok["token_b64"], content, required_scope=scope)
        votes.append(
            {
                "approver": i,
                "seed_hex": APPROVER_SEEDS[i].hex(),
                "public_key": approver_pubs[i],
                "token": tok,
                "leg": {
                    "record": rec,
                    "approver_pubkey_b64": approver_pubs[i],
                    "co_sig_b64": co_sig,
                },
                "cosign_payload_hex": bytes(payload).hex(),
            }
        )
    ASSEMBLY[action_hash] = {
        "legs": [v["leg"] for v in votes],
        "threshold": threshold,
        "roster": roster,
        "suspended_content": content,
    }
    if threshold == 1:
        parts = capprovals.get_l1_parts(action_hash)
        heso.finalize_l1(action_hash, parts.suspended_content, parts)
    else:
        qparts = capprovals.get_quorum_parts(action_hash)
        heso.finalize_quorum(
            action_hash, qparts.suspended_content, qparts, loaded_operator_pubkey_b64=OPERATOR_PUB
        )
    requests = [dict(r) for r in HTTP_LOG[http_mark:]]
    final_push = requests[-1]
    assert final_push["path"] == "/v1/receipts"
    assert final_push["body"]["supersedes_action_hash"] == action_hash
    final = final_push["body"]["receipt"]
    for req in requests:  # elide receipt bodies: they are `suspended` / `l1` below
        if req["path"] == "/v1/receipts":
            which = "l1" if "supersedes_action_hash" in req["body"] else "suspended"
            req["body"] = dict(req["body"], receipt=f"<{which} receipt below>")
    return {
        "ticket": hand,
        "suspended": suspended,
        "suspended_notes": note(suspended),
        "threshold": threshold,
        "roster": roster,
        "scope": scope,
        "approvers": votes,
        "l1": final,
        "l1_notes": note(final, f"supersedes_action_hash={action_hash}"),
        "supersedes_action_hash": action_hash,
        "sdk_requests": requests,
    }


l1_single = finalize(
    "single",
    lambda: charge_card(4200, "CAD", "Northwind Traders"),
    1,
    [0],
    ["approved: matches PO-4711"],
)
l1_quorum = finalize(
    "quorum",
    lambda: drop_table("customers_2019", cascade=True),
    2,
    [0, 1],
    ["ok, retention expired", "согласовано — ok"],
)
for part in (l1_single, l1_quorum):
    assert part["l1_notes"]["verify_action_receipt"]["trust_level"] == "L1"

# =========================================================================== write

held = sum(t["formula_holds"] for t in tickets)
corpus = {
    "description": (
        "Receipts minted by the real heso SDK's own engine (decorators, heso.wrap, "
        "heso.mcp, heso.process, @heso.gated + append_decision / process_sweep, heso-mcp's "
        "gate, heso.finalize_l1 / finalize_quorum) in a throwaway project outside this repo; "
        "nothing here is hand-built except approval tokens and approver co-signatures (made "
        "as an approver's browser would, over the SDK's own payload bytes). "
        "operator: the project's identity.key seed and public key (= agent_identity). "
        "decision_key: the key that signs heso.gated approved/denied/expired links "
        "(configured = heso-local-data/decision.key; insecure_placeholder = the wheel's public "
        "key under HESO_ALLOW_INSECURE_LOCAL_DECISION_KEY). "
        "flows[]: {name, receipts: envelopes in the order a client pushes them (all plain "
        "pushes, no supersedes), notes: {summary, per_receipt[i] aligned with receipts: "
        "action_hash, kind, claimed_trust_level, decision_path, signed_by (first entry that "
        "verifies under the kind's domain, receipts.md §12; for a quorum the operator, over the "
        "empty-approvers base), decision_signer (the key that signed the decision: for "
        "approved/denied/expired links and single-approver L1, else null), approver_signers "
        "(action receipts), both reference verdicts (verify_action_receipt echoes a lifecycle "
        "link's claimed level; verify_lifecycle_receipt is the one that applies to them), "
        "session_id/seq/link_hash when chained, and the trust level this service derives "
        "(server.md §1: server_trust_level, or for decision links "
        "server_trust_level_if_signer_registered / _if_signer_not_registered), plus "
        "flow-level chain verdicts and, for gated flows, the gated calls' return values}}. "
        "tickets[]: {source, operator_public_key, ticket: the hash the SDK hands its user, "
        "engine_ticket, receipt: "
        "the suspended receipt a client pushes, formula_holds: ticket == "
        "hex(BLAKE3(JCS(content without action_hash, agent_identity ''))) per server.md §6 "
        "computed with heso._core (and clean_room_formula with rfc8785+blake3, ints as "
        "doubles), verify_action_receipt}. "
        "l1.single / l1.quorum: the suspended receipt, threshold, roster, scope (= the token "
        "scope = policy.rule_id), approvers[] {seed_hex, public_key, token (base64, fixed "
        "nonce, expiry 2100-01-01), leg {record text verbatim, approver_pubkey_b64, "
        "co_sig_b64}, cosign_payload_hex}, the final L1 receipt heso.finalize_* pushed with "
        "supersedes_action_hash, and sdk_requests: the HTTP requests the SDK sent in order "
        "(receipt bodies elided). Not deterministic across runs: commit-and-reveal "
        "commitments/merkle roots and suspension.resume_token_hash (engine randomness), "
        "and every hash/signature over them."
    ),
    "generator": "deploy/interop/make_sdk_corpus.py (run in a throwaway venv with heso)",
    "sdk_version": importlib.metadata.version("heso"),
    "clock_override": CLOCK,
    "policy_toml": POLICY,
    "policy_hash": str(core.blake3_hash(POLICY.encode())),
    "operator": {"seed_hex": OPERATOR_SEED.hex(), "public_key": OPERATOR_PUB},
    "other_operator": {
        "seed_hex": OTHER_OPERATOR_SEED.hex(),
        "public_key": pub_of(OTHER_OPERATOR_SEED),
        "used_by": "the tickets[] entry with this operator_public_key: same ticket as "
        "tickets[0], another content.action_hash",
    },
    "decision_key": {
        "configured": {
            "seed_hex": DECISION_SEED.hex(),
            "public_key": DECISION_PUB,
            "used_by": [name for name, *_ in gated_flows],
        },
        "insecure_placeholder": {
            "seed_hex": PLACEHOLDER_SEED.hex(),
            "public_key": PLACEHOLDER_PUB,
            "env": INSECURE_ENV + "=1",
            "used_by": ["gated_placeholder_approved"],
        },
    },
    "approver_keys": [
        {"seed_hex": s.hex(), "public_key": p}
        for s, p in zip(APPROVER_SEEDS, approver_pubs, strict=True)
    ],
    "flows": flows,
    "tickets": tickets,
    "ticket_formula": {
        "statement": "T = lowercase_hex(BLAKE3(JCS(content without action_hash, with "
        "agent_identity = '')))",
        "checked": len(tickets),
        "held": held,
    },
    "l1": {"single": l1_single, "quorum": l1_quorum},
    "observations": {
        "suspend_messages": console_messages,
        "http_requests_during_flows_and_gated_sessions": 0,
    },
}
OUT.parent.mkdir(parents=True, exist_ok=True)
OUT.write_text(json.dumps(corpus, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
print(
    f"{OUT}: {OUT.stat().st_size} bytes, {len(flows)} flows, {len(tickets)} tickets, "
    f"ticket formula held on {held}/{len(tickets)}"
)
