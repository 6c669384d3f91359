"""Cross-check against the real heso SDK (never a dependency: run it in a throwaway venv).

    python3 -m venv /tmp/heso-venv && /tmp/heso-venv/bin/pip install heso==0.5.1 pynacl
    MIRROR_URL=http://127.0.0.1:8000 MIRROR_API_KEY=hk_... MIRROR_POLICY_FILE=policy.toml \
        /tmp/heso-venv/bin/python deploy/interop/heso_sdk_check.py

The org must have the policy file deployed and the three approver keys printed by
``... heso_sdk_check.py pubs`` registered (manage.py register_approver_key). It drives
fetch_policy, push_receipt, open_approval, poll_approval, submit_token, get_l1_parts and
get_quorum_parts against the service, assembles with the wheel's own assemblers and pushes
the L1 receipts with supersedes_action_hash. Output written to MIRROR_INTEROP_OUT (if
set) is what tests/data/sdk/approvals_interop.json holds.
"""

import base64
import json
import os
import struct
import sys
import time
import urllib.error
import urllib.request

import heso._core as core
from heso.cloud import approvals as capprovals
from heso.cloud import client, outbox
from heso.cloud import policy as cpolicy
from nacl.signing import SigningKey

RUN = os.urandom(4).hex()
BASE = os.environ.get("MIRROR_URL", "http://127.0.0.1:8000")
KEY = os.environ.get("MIRROR_API_KEY", "")
client.configure(api_key=KEY, endpoint=BASE)
approvers = [SigningKey(bytes([i]) * 32) for i in (11, 12, 13)]
pubs = [base64.b64encode(bytes(a.verify_key)).decode() for a in approvers]
if sys.argv[1:] == ["pubs"]:
    print("\n".join(pubs))
    sys.exit()

toml = cpolicy.fetch_policy()
with open(os.environ["MIRROR_POLICY_FILE"]) as policy_file:
    assert toml == policy_file.read(), toml
print("fetch_policy: ok,", len(toml), "bytes")

operator = core.key_from_seed(bytes([7]) * 32)
op_pub = None


def suspended(n):
    content = {
        "action_version": "heso-action/2.0",
        "captured_at": "2026-11-22T10:00:00Z",
        "agent_identity": "",
        "action": {
            "verb": "payment",
            "tool_name": "stripe.charge",
            "workflow": "billing",
            "account": "acct",
            "fields": {"amount": 100 + n, "run": RUN},
        },
        "policy": {
            "rule_id": "payments.review",
            "rule_display": "review payments",
            "matched_conditions": [{"field": "verb", "op": "eq", "value": "payment"}],
            "decision_path": "require_approval",
        },
        "trust_level": "L0",
    }
    return content


# Learn the operator public key from a signed receipt.
op_pub = base64.b64encode(bytes(SigningKey(bytes([7]) * 32).verify_key)).decode()


def mint(n):
    content = suspended(n)
    content["agent_identity"] = op_pub
    content["action_hash"] = "0" * 64
    return json.loads(core.sign_action_content(operator, json.dumps(content).encode()))


def token(signer, content, scope, decision="approved"):
    a = core.action_canonical_bytes(json.dumps(content).encode())
    nonce = os.urandom(32)
    expiry = int(time.time()) + 600
    tag = b"\x01" if decision == "approved" else b"\x02"
    s = scope.encode()
    fields = nonce + struct.pack(">Q", expiry) + tag + struct.pack(">I", len(s)) + s
    sig = signer.sign(b"heso-approval-token/v1\x00" + fields + a).signature
    return base64.b64encode(fields + sig + bytes(signer.verify_key)).decode()


def record(pub):
    return json.dumps(
        {
            "decision": "approved",
            "approver_identity": pub,
            "reason": "ok",
            "decided_at": "2026-11-22T10:05:00Z",
        }
    )


def post(path, body):
    if not BASE.startswith(("http://", "https://")):
        raise SystemExit("MIRROR_URL must be http(s)")
    req = urllib.request.Request(  # noqa: S310 (scheme checked above)
        BASE + path,
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Content-Type": "application/json", "x-api-key": KEY},
    )
    try:
        with urllib.request.urlopen(req) as r:  # noqa: S310
            return json.loads(r.read())
    except urllib.error.HTTPError as e:
        raise SystemExit(f"{path}: {e.code} {e.read().decode()}") from None


# --- single approver: SDK open/poll/submit, leg via the raw route, wheel assembly
r1 = mint(1)
h1 = r1["content"]["action_hash"]
print("push suspended:", outbox.push_receipt(r1))
view = capprovals.open_approval(h1, rule_id="payments.review", threshold=1)
print("open_approval:", view)
rec = record(pubs[0])
payload = core.l1_cosign_payload(json.dumps(r1["content"]).encode(), rec.encode())
cosig = base64.b64encode(approvers[0].sign(bytes(payload)).signature).decode()
out = post(
    f"/v1/approvals/{h1}/submit-token",
    {
        "token_b64": token(approvers[0], r1["content"], "payments.review"),
        "action_content": r1["content"],
        "record": rec,
        "co_sig_b64": cosig,
    },
)
print("submit-token with leg:", out)
print("poll_approval:", capprovals.poll_approval(h1))
parts = capprovals.get_l1_parts(h1)
l1 = core.assemble_l1_from_parts(
    operator,
    json.dumps(parts_sc := r1["content"]).encode(),
    parts.record.encode(),
    parts.approver_pubkey,
    parts.co_sig,
)
print("wheel verdict of assembled L1:", core.verify_action_receipt(l1))
print("push L1 supersedes:", outbox.push_receipt(json.loads(l1), supersedes_action_hash=h1))

# --- 2-of-3 quorum through the SDK's own submit_token, legs via raw route
r2 = mint(2)
h2 = r2["content"]["action_hash"]
outbox.push_receipt(r2)
capprovals.open_approval(h2, rule_id="payments.review", threshold=2)
qparts_roster = sorted(pubs)
for i in (0, 1):
    rec = record(pubs[i])
    payload = core.quorum_cosign_payload(
        json.dumps(r2["content"]).encode(), 2, json.dumps(qparts_roster).encode(), rec.encode()
    )
    cosig = base64.b64encode(approvers[i].sign(bytes(payload)).signature).decode()
    post(
        f"/v1/approvals/{h2}/submit-token",
        {
            "token_b64": token(approvers[i], r2["content"], "payments.review"),
            "action_content": r2["content"],
            "record": rec,
            "co_sig_b64": cosig,
        },
    )
q = capprovals.get_quorum_parts(h2)
print("get_quorum_parts:", q.threshold, len(q.roster), len(q.legs) if hasattr(q, "legs") else q)
qreceipt = core.assemble_quorum_from_parts(
    operator,
    json.dumps(r2["content"]).encode(),
    q.threshold,
    json.dumps(q.roster).encode(),
    json.dumps(
        [
            {
                "record": leg.record,
                "approver_pubkey_b64": leg.approver_pubkey_b64,
                "co_sig_b64": leg.co_sig_b64,
            }
            for leg in q.legs
        ]
    ).encode(),
)
print("wheel verdict of quorum:", core.verify_action_receipt(qreceipt))
print(
    "push quorum supersedes:", outbox.push_receipt(json.loads(qreceipt), supersedes_action_hash=h2)
)

# The SDK's own submit_token (a vote without a leg) on a third approval.
r3 = mint(3)
h3 = r3["content"]["action_hash"]
outbox.push_receipt(r3)
capprovals.open_approval(h3, rule_id="payments.review", threshold=2)
v = capprovals.submit_token(
    h3, token(approvers[2], r3["content"], "payments.review"), r3["content"]
)
print("sdk submit_token:", v.status, v.approved_count, v.threshold)
with open(os.environ.get("MIRROR_INTEROP_OUT", os.devnull), "w") as out:
    json.dump(
        {
            "generator": "heso 0.5.1 wheel assemblers, deploy/interop/heso_sdk_check.py",
            "single": {"suspended": r1, "l1": json.loads(l1)},
            "quorum": {
                "suspended": r2,
                "l1": json.loads(qreceipt),
                "threshold": 2,
                "roster": q.roster,
            },
        },
        out,
        indent=1,
    )
