"""The demo ``make run`` seeds: an org with real data on every console screen.

Idempotent: the demo's API key, approver key seed and console password live in a local
file (``LOCAL_DATA_DIR/demo.json``, mode 0600, never in the database) and are reused while
it exists; receipts already mirrored are not pushed again; the example policy is deployed
only when the org has none. Only the demo org is touched: an existing org of that slug
that was not created as the demo is refused. The console sits above every feature app,
so the seed goes through their own services (the receipt intake the push routes use, which
opens the approval of a suspended receipt; approver key registration, policy deploy).
"""

from __future__ import annotations

import base64
import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from nacl.signing import SigningKey

from apps.approvals.models import ApproverKey
from apps.approvals.services import approver_key_register, receipt_intake
from apps.common.errors import DomainError
from apps.policy.models import PolicyHead
from apps.policy.services import policy_deploy
from apps.receipts.verifier import parse_json
from apps.tenancy.audit_trail import Actor
from apps.tenancy.models import DEFAULT_SCOPES, Membership, Org, Plan, Role
from apps.tenancy.services import api_key_authenticate, api_key_issue, membership_add, org_create

DEMO_ORG_NAME = "Demo org (Countersign demo)"
DEMO_KEY_LABEL = "demo"
DEMO_APPROVER_KEY_ID = "ak_demo"
EXAMPLE_POLICY = Path(settings.BASE_DIR) / "deploy" / "examples" / "policy.toml"
# Receipts the real heso SDK minted (tests/data/sdk/corpus.json, see its description).
CORPUS = Path(settings.BASE_DIR) / "tests" / "data" / "sdk" / "corpus.json"
# The agent session the demo mirrors: flows and which of their receipts, in push order.
# The payment above 1,000 is suspended for approval and opens the demo's pending approval.
SEEDED_FLOWS: tuple[tuple[str, tuple[int, ...]], ...] = (
    ("chained_session", (0, 1, 2, 3, 4, 5)),  # allowed tool, LLM, redacted, MCP, HTTP
    ("redaction", (0, 1)),
    ("llm_call", (0,)),
    ("result_bound", (0, 1)),
    ("payment", (0,)),
)
# Held back for the printed curl, so that the first push is the newcomer's own.
CURL_FLOW = "decorator_allow"


class DemoRefused(DomainError):
    """The slug or username belongs to something that is not the demo's."""


@dataclass(frozen=True)
class Demo:
    org: Org
    api_key: str
    username: str
    password: str
    approver_key_id: str
    approver_public_key: str
    approver_seed_hex: str  # demo only: printed so that scripts can approve
    receipts_appended: int  # by this run (0 on a re-run)
    first_receipt_file: Path  # the body of the printed curl
    state_file: Path


def demo_bootstrap(*, slug: str, username: str, state_dir: Path) -> Demo:
    """Create or reuse the demo org, its credentials and its data; see the module doc."""
    state_file = state_dir / "demo.json"
    state = _read_state(state_file)
    org = _existing_demo_org(slug)
    _check_login_is_the_demos(org, username)
    if org is None:
        org = org_create(slug=slug, name=DEMO_ORG_NAME, plan=Plan.PRO)
    api_key = _demo_api_key(org, state.get("api_key"))
    seed_hex, approver_public = _demo_approver_key(org, state.get("approver_seed_hex"))
    password = _demo_login(org, username, state.get("password"))
    _write_state(
        state_file,
        {"org": org.slug, "api_key": api_key, "approver_seed_hex": seed_hex, "password": password},
    )
    if not PolicyHead.objects.filter(org=org, version__isnull=False).exists():
        # Only on a fresh demo: a policy deployed since (console, API) is kept.
        policy_deploy(org=org, toml=EXAMPLE_POLICY.read_text(), actor=Actor.command("demo"))
    corpus = json.loads(CORPUS.read_text())
    appended = _seed_receipts(org, corpus)
    first_receipt = state_dir / "first-receipt.json"
    first_receipt.write_text(
        json.dumps({"receipt": _flow(corpus, CURL_FLOW)[0]}, ensure_ascii=False)
    )
    return Demo(
        org=org,
        api_key=api_key,
        username=username,
        password=password,
        approver_key_id=DEMO_APPROVER_KEY_ID,
        approver_public_key=approver_public,
        approver_seed_hex=seed_hex,
        receipts_appended=appended,
        first_receipt_file=first_receipt,
        state_file=state_file,
    )


def _existing_demo_org(slug: str) -> Org | None:
    org = Org.objects.filter(slug=slug).first()
    if org is not None and org.name != DEMO_ORG_NAME:
        raise DemoRefused(
            f"org {slug!r} exists and is not the demo org ({org.name!r}): not touching it; "
            "choose another with --org"
        )
    return org


def _check_login_is_the_demos(org: Org | None, username: str) -> None:
    user = get_user_model().objects.filter(username=username).first()
    if user is None:
        return
    if org is None or not Membership.objects.filter(org=org, user=user).exists():
        raise DemoRefused(
            f"console user {username!r} exists outside the demo org: not touching it; "
            "choose another with --username"
        )


def _demo_api_key(org: Org, kept: str | None) -> str:
    if kept:
        api_key = api_key_authenticate(presented=kept)
        if api_key is not None and api_key.org_id == org.pk:
            return kept
    return api_key_issue(org=org, scopes=DEFAULT_SCOPES, label=DEMO_KEY_LABEL).secret


def _demo_approver_key(org: Org, kept: str | None) -> tuple[str, str]:
    seed_hex = kept or SigningKey.generate().encode().hex()
    public = base64.b64encode(bytes(SigningKey(bytes.fromhex(seed_hex)).verify_key)).decode()
    active = ApproverKey.objects.filter(
        org=org, key_id=DEMO_APPROVER_KEY_ID, revoked_at__isnull=True
    ).first()
    if active is None or active.public_key != public:
        # A new seed (its file was deleted) rotates the demo key: the old one is revoked.
        approver_key_register(
            org=org,
            public_key=public,
            key_id=DEMO_APPROVER_KEY_ID,
            label="Demo approver (demo only)",
            actor=Actor.command("demo"),
        )
    return seed_hex, public


def _demo_login(org: Org, username: str, kept: str | None) -> str:
    user = get_user_model().objects.filter(username=username).first()
    if user is not None and kept and user.check_password(kept):
        return kept  # unchanged: no reset, so open sessions stay signed in
    password = secrets.token_urlsafe(12)
    membership = membership_add(org=org, username=username, role=Role.OWNER, password=password)
    # The demo login also administers the console itself (orgs, keys, members).
    get_user_model().objects.filter(pk=membership.user.pk).update(is_superuser=True)
    return password


def _seed_receipts(org: Org, corpus: dict[str, Any]) -> int:
    appended = 0
    for name, indexes in SEEDED_FLOWS:
        receipts = _flow(corpus, name)
        for index in indexes:
            # Through the push's own intake, parsed from the wire text as the route does.
            wire = json.dumps(receipts[index], ensure_ascii=False).encode()
            outcome = receipt_intake(org=org, receipt=parse_json(wire))
            appended += int(outcome.appended)
    return appended


def _flow(corpus: dict[str, Any], name: str) -> list[Any]:
    flow = next(flow for flow in corpus["flows"] if flow["name"] == name)
    receipts: list[Any] = flow["receipts"]
    return receipts


def _read_state(path: Path) -> dict[str, str]:
    try:
        loaded = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(loaded, dict):
        return {}
    return {key: value for key, value in loaded.items() if isinstance(value, str)}


def _write_state(path: Path, state: dict[str, str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        json.dump(state, handle, indent=2)
    path.chmod(0o600)
