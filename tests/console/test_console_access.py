"""The console's authorization matrix: a superuser sees and changes everything; a member
sees their orgs only (as row-level security does) and changes them only as manager or
higher; every action lands in the admin log, which nobody edits."""

from __future__ import annotations

import re
from http import HTTPStatus

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth import get_user_model
from django.test import Client

from apps.approvals.models import ApproverKey
from apps.approvals.services import approval_open, approver_key_register
from apps.policy.models import PolicyDeployment
from apps.policy.selectors import policy_active
from apps.policy.services import policy_deploy
from apps.receipts.models import MirrorEntry
from apps.tenancy.models import ApiKey, Invitation, Membership, Org, OrgAuditEvent, Plan
from apps.tenancy.services import api_key_authenticate
from tests.approvals.conftest import Approver
from tests.policy.test_policy_api import ALLOW_SEARCH, BLOCK_SEARCH
from tests.receipts.factories import Agent


@pytest.fixture
def root(db) -> Client:
    get_user_model().objects.create_superuser("root", "root@example.com", "pw-root")
    client = Client()
    assert client.login(username="root", password="pw-root")
    return client


def member(role: str) -> Client:
    client = Client()
    assert client.login(username=f"acme-{role}", password=f"pw-{role}")
    return client


@pytest.fixture
def agents(cast, push, globex_push) -> dict[str, Agent]:
    """Two receipts mirrored for acme, one for globex."""
    acme, globex = Agent(), Agent()
    billing = {"verb": "tool_call", "tool_name": "search", "target_host": "api.example.com",
               "workflow": "billing/monthly", "account": "org/unit", "fields": {}}  # fmt: skip
    for receipt in (acme.receipt(), acme.receipt(action=billing)):
        assert push(receipt).status_code == HTTPStatus.CREATED
    assert globex_push(globex.receipt()).status_code == HTTPStatus.CREATED
    return {"acme": acme, "globex": globex}


def logged(user: str, message: str) -> bool:
    """In the console's admin log (form saves) or the org's audit trail (every service)."""
    return (
        LogEntry.objects.filter(user__username=user, change_message__contains=message).exists()
        or LogEntry.objects.filter(user__username=user, object_repr__contains=message).exists()
        or OrgAuditEvent.objects.filter(actor=user, summary__icontains=message).exists()
    )


# --- what each one sees -------------------------------------------------------------------------


# Each list page, with what marks an acme row and a globex row on it.
LISTS = {
    "orgs": ("/admin/tenancy/org/", lambda cast, agents: (">acme<", ">globex<")),
    "api-keys": ("/admin/tenancy/apikey/",
                 lambda cast, agents: (cast.acme_key.api_key.prefix,
                                       cast.globex_key.api_key.prefix)),
    "receipts": ("/admin/receipts/mirrorentry/",
                 lambda cast, agents: (agents["acme"].identity[:20],
                                       agents["globex"].identity[:20])),
    "policy-versions": ("/admin/policy/policyversion/", lambda cast, agents: ("", "globex")),
    "approver-keys": ("/admin/approvals/approverkey/", lambda cast, agents: ("", "globex-k")),
    "memberships": ("/admin/tenancy/membership/", lambda cast, agents: ("acme-owner", "globex")),
}  # fmt: skip


@pytest.mark.parametrize("listing", list(LISTS))
@pytest.mark.parametrize("role", ["viewer", "manager"])
def test_members_list_only_their_orgs_rows_everywhere(cast, agents, role, listing) -> None:
    approver_key_register(org=cast.globex, public_key=Approver("g").public, key_id="globex-k")
    policy_deploy(org=cast.globex, toml=ALLOW_SEARCH)
    url, markers = LISTS[listing]
    acme_marker, globex_marker = markers(cast, agents)
    page = member(role).get(url)
    assert page.status_code == HTTPStatus.OK, url
    html = page.content.decode()
    assert acme_marker in html, url
    assert globex_marker not in html, url


def test_a_superuser_lists_every_org(cast, agents, root) -> None:
    """Each org's receipts, one org at a time (the list pages by the org's seq)."""
    html = root.get("/admin/receipts/mirrorentry/").content.decode()
    assert agents["acme"].identity[:20] in html
    html = root.get("/admin/receipts/mirrorentry/", {"org": cast.globex.pk}).content.decode()
    assert agents["globex"].identity[:20] in html
    assert agents["acme"].identity[:20] not in html
    assert root.get(f"/admin/tenancy/org/{cast.globex.pk}/dashboard/").status_code == 200


@pytest.mark.parametrize(
    ("method", "url", "status"),
    [
        # The admin's "does not exist": a redirect to the index.
        pytest.param("get", "/admin/receipts/mirrorentry/{entry}/change/", HTTPStatus.FOUND,
                     id="receipt-change-page"),
        pytest.param("get", "/admin/tenancy/apikey/{key}/change/", HTTPStatus.FOUND,
                     id="api-key-change-page"),
        pytest.param("get", "/admin/tenancy/org/{org}/change/", HTTPStatus.FOUND,
                     id="org-change-page"),
        pytest.param("get", "/admin/tenancy/org/{org}/dashboard/", HTTPStatus.NOT_FOUND,
                     id="org-dashboard"),
        pytest.param("post", "/admin/receipts/mirrorentry/{entry}/reverify/",
                     HTTPStatus.NOT_FOUND, id="receipt-reverify"),
    ],
)  # fmt: skip
def test_another_orgs_objects_do_not_open(cast, agents, method, url, status) -> None:
    globex_entry = MirrorEntry.objects.get(org=cast.globex)
    url = url.format(entry=globex_entry.pk, key=cast.globex_key.api_key.pk, org=cast.globex.pk)
    page = getattr(member("manager"), method)(url)
    assert page.status_code == status, url
    if status == HTTPStatus.FOUND:
        assert page["Location"] == "/admin/"


ORG_FORM = {"slug": "acme", "name": "Acme", "plan": Plan.CUSTOM, "monthly_receipt_cap": "9",
            "rate_per_minute": "", "rate_burst": ""}  # fmt: skip


@pytest.mark.parametrize("role", ["manager", "owner"])
def test_the_org_is_read_only_to_members_plan_and_limits_included(cast, role) -> None:
    answer = member(role).post(f"/admin/tenancy/org/{cast.acme.pk}/change/", ORG_FORM)
    assert answer.status_code == HTTPStatus.FORBIDDEN
    assert Org.objects.get(pk=cast.acme.pk).plan == Plan.PRO


def test_a_superuser_changes_the_orgs_plan_and_it_is_logged(cast, root) -> None:
    assert root.post(f"/admin/tenancy/org/{cast.acme.pk}/change/", ORG_FORM).status_code == 302
    assert Org.objects.get(pk=cast.acme.pk).plan == Plan.CUSTOM
    assert logged("root", "Plan")


# --- dashboard ----------------------------------------------------------------------------------


def test_the_dashboard_offers_writes_to_managers_only_and_links_approvals(cast, agents) -> None:
    approver_key_register(org=cast.acme, public_key=Approver("a").public, key_id="a")
    opened = approval_open(org=cast.acme, action_hash="cd" * 32, rule_id="payments.review")
    policy_deploy(org=cast.acme, toml=ALLOW_SEARCH)
    policy_deploy(org=cast.acme, toml=BLOCK_SEARCH)
    url = f"/admin/tenancy/org/{cast.acme.pk}/dashboard/"
    viewer = member("viewer").get(url).content.decode()
    manager = member("manager").get(url).content.decode()
    approval = opened.approval
    for html in (viewer, manager):
        assert f"/admin/approvals/approval/{approval.pk}/change/" in html
        assert f"/approve/{approval.approval_id}" in html
        assert "/admin/policy/policyversion/compare/" in html  # two versions: a diff offered
        assert "2 / 250,000 (0.0% of quota) receipts" in html
    assert "/admin/policy/policyversion/add/" in manager
    assert "/admin/policy/policyversion/add/" not in viewer


# --- receipts -----------------------------------------------------------------------------------


def rows(answer) -> int:
    return answer.content.decode().count('name="_selected_action"')


def test_receipts_search_by_identity_and_workflow(cast, agents, root) -> None:
    """One org at a time: the list opens on the first org (by slug), the filter picks another."""
    identity = agents["globex"].identity
    assert rows(root.get("/admin/receipts/mirrorentry/", {"q": identity})) == 0  # acme's list
    by_identity = root.get("/admin/receipts/mirrorentry/", {"org": cast.globex.pk, "q": identity})
    assert rows(by_identity) == 1
    assert rows(root.get("/admin/receipts/mirrorentry/", {"q": "billing/monthly"})) == 1
    assert rows(root.get("/admin/receipts/mirrorentry/", {"q": "billing/"})) == 1  # a prefix
    assert rows(root.get("/admin/receipts/mirrorentry/", {"q": "monthly"})) == 0  # not inside


@pytest.mark.parametrize(
    ("query", "count"),
    [
        pytest.param(lambda cast: {"trust_level__exact": "L0"}, 2, id="trust-level-L0"),
        pytest.param(lambda cast: {"trust_level__exact": "L1"}, 0, id="trust-level-L1"),
        pytest.param(lambda cast: {"kind": "action"}, 2, id="kind-action"),
        pytest.param(lambda cast: {"verb": "payment"}, 0, id="verb-payment"),
        pytest.param(lambda cast: {"decision_path": "allow"}, 2, id="decision-path-allow"),
        pytest.param(lambda cast: {"org": cast.globex.pk}, 1, id="org-globex"),
        pytest.param(lambda cast: {"received": "today"}, 2, id="today"),
        pytest.param(lambda cast: {"received": "last-month"}, 0, id="last-month"),
    ],
)
def test_receipts_filter(cast, agents, root, query, count) -> None:
    assert rows(root.get("/admin/receipts/mirrorentry/", query(cast))) == count


@pytest.mark.parametrize("role", ["viewer", "manager"])
def test_the_reverify_button_shows_the_verdict_and_changes_nothing(cast, agents, role) -> None:
    entry = MirrorEntry.objects.get(org=cast.acme, seq=1)
    recorded = (LogEntry.objects.count(), OrgAuditEvent.objects.count())
    client = member(role)
    page = client.get(f"/admin/receipts/mirrorentry/{entry.pk}/change/").content.decode()
    assert f"/admin/receipts/mirrorentry/{entry.pk}/reverify/" in page
    assert "Policy outcome" in page
    answer = client.post(f"/admin/receipts/mirrorentry/{entry.pk}/reverify/", follow=True)
    valid = "Valid at L0 (the receipt verifies: its hash, signatures and trust level hold)"
    assert f"#1: {valid}; digest and chain link hold" in answer.content.decode()
    # A check, not a change: nothing to record.
    assert (LogEntry.objects.count(), OrgAuditEvent.objects.count()) == recorded
    get = client.get(f"/admin/receipts/mirrorentry/{entry.pk}/reverify/")
    assert get.status_code == HTTPStatus.METHOD_NOT_ALLOWED


def test_reverification_catches_a_rewritten_link(cast, agents, root) -> None:
    second = MirrorEntry.objects.get(org=cast.acme, seq=2)
    MirrorEntry.objects.filter(pk=second.pk).update(prev_chain_hash="00" * 32)
    first = MirrorEntry.objects.get(org=cast.acme, seq=1)
    html = root.post(f"/admin/receipts/mirrorentry/{second.pk}/reverify/", follow=True)
    assert "prev_chain_hash is not entry #1" in html.content.decode()
    html = root.post(f"/admin/receipts/mirrorentry/{first.pk}/reverify/", follow=True)
    assert "entry #2 does not link to this chain_hash" in html.content.decode()


def test_receipts_stay_read_only_for_everyone(cast, agents, root) -> None:
    entry = MirrorEntry.objects.get(org=cast.acme, seq=1)
    for client in (root, member("owner")):
        assert client.get("/admin/receipts/mirrorentry/add/").status_code == 403
        posted = client.post(f"/admin/receipts/mirrorentry/{entry.pk}/change/", {"seq": 9})
        assert posted.status_code == HTTPStatus.FORBIDDEN
        assert client.post(f"/admin/receipts/mirrorentry/{entry.pk}/delete/").status_code == 403
    assert MirrorEntry.objects.get(pk=entry.pk).seq == 1


# --- policy -------------------------------------------------------------------------------------


def test_a_parse_error_is_shown_inline_and_nothing_deploys(cast) -> None:
    answer = member("manager").post(
        "/admin/policy/policyversion/add/", {"org": cast.acme.pk, "toml": "[[rules]\nid = "}
    )
    assert answer.status_code == HTTPStatus.OK
    assert "errorlist" in answer.content.decode()
    assert policy_active(org=cast.acme).is_fail_safe
    assert not LogEntry.objects.exists()


def test_a_manager_cannot_deploy_to_another_org(cast) -> None:
    answer = member("manager").post(
        "/admin/policy/policyversion/add/", {"org": cast.globex.pk, "toml": ALLOW_SEARCH}
    )
    assert answer.status_code == HTTPStatus.OK  # the org is not a choice: a form error
    assert policy_active(org=cast.globex).is_fail_safe


def test_compare_any_two_versions_of_an_org(cast) -> None:
    old = policy_deploy(org=cast.acme, toml=ALLOW_SEARCH).version
    new = policy_deploy(org=cast.acme, toml=BLOCK_SEARCH).version
    viewer = member("viewer")
    page = viewer.get("/admin/policy/policyversion/compare/", {"old": old.pk, "new": new.pk})
    html = page.content.decode()
    assert page.status_code == HTTPStatus.OK
    assert re.search(r'<span style="background:#e6ffec">\+decision = &quot;block&quot;', html)
    assert re.search(r'<span style="background:#ffebe9">-decision = &quot;allow&quot;', html)
    detail = viewer.get(f"/admin/policy/policyversion/{new.pk}/change/").content.decode()
    assert "Compare with" in detail
    assert "/rollback/" not in detail  # viewers get no roll-back button


@pytest.mark.parametrize(
    ("old", "new"),
    [
        pytest.param("acme-old", "globex", id="versions-of-two-orgs"),
        pytest.param("globex", "globex", id="another-orgs-versions"),
        pytest.param("x", "acme-new", id="not-a-version"),
    ],
)
def test_compare_refuses_what_is_not_two_versions_of_the_members_org(cast, old, new) -> None:
    versions = {
        "acme-old": policy_deploy(org=cast.acme, toml=ALLOW_SEARCH).version.pk,
        "acme-new": policy_deploy(org=cast.acme, toml=BLOCK_SEARCH).version.pk,
        "globex": policy_deploy(org=cast.globex, toml=ALLOW_SEARCH).version.pk,
        "x": "x",
    }
    answer = member("viewer").get(
        "/admin/policy/policyversion/compare/", {"old": versions[old], "new": versions[new]}
    )
    assert answer.status_code == HTTPStatus.NOT_FOUND


def test_the_rollback_button_redeploys_through_the_service(cast) -> None:
    old = policy_deploy(org=cast.acme, toml=ALLOW_SEARCH).version
    policy_deploy(org=cast.acme, toml=BLOCK_SEARCH)
    url = f"/admin/policy/policyversion/{old.pk}/rollback/"
    assert member("viewer").post(url).status_code == HTTPStatus.FORBIDDEN
    assert member("auditor").post(url).status_code == HTTPStatus.FORBIDDEN
    assert policy_active(org=cast.acme).toml == BLOCK_SEARCH
    manager = member("manager")
    assert (
        "/rollback/"
        in manager.get(f"/admin/policy/policyversion/{old.pk}/change/").content.decode()
    )
    assert manager.post(url).status_code == HTTPStatus.FOUND
    assert policy_active(org=cast.acme).policy_id == old.policy_id
    history = PolicyDeployment.objects.filter(org=cast.acme).order_by("-id").first()
    assert (history.channel, history.deployed_by.username) == ("console", "acme-manager")
    assert logged("acme-manager", "deployed")
    globex = policy_deploy(org=cast.globex, toml=ALLOW_SEARCH).version
    assert manager.post(f"/admin/policy/policyversion/{globex.pk}/rollback/").status_code == 404


def test_preview_is_for_managers(cast) -> None:
    assert member("viewer").get("/admin/policy/policyversion/preview/").status_code == 403
    assert member("manager").get("/admin/policy/policyversion/preview/").status_code == 200


# --- API keys -----------------------------------------------------------------------------------


def test_issuing_shows_the_secret_once_on_an_uncached_page(cast) -> None:
    client = member("manager")
    answer = client.post(
        "/admin/tenancy/apikey/add/",
        {"org": cast.acme.pk, "label": "ci", "scopes": ["receipts:write", "policy:read"]},
    )
    assert answer.status_code == HTTPStatus.OK
    assert "no-store" in answer["Cache-Control"]
    secret = re.search(r"(hk_[0-9a-f]{12}_[A-Za-z0-9_-]+)", answer.content.decode()).group(1)
    key = api_key_authenticate(presented=secret)
    assert (key.label, sorted(key.scopes)) == ("ci", ["policy:read", "receipts:write"])
    assert secret not in "".join(morsel.value for morsel in answer.cookies.values())
    following = client.get("/admin/tenancy/apikey/").content.decode()
    assert secret not in following
    assert logged("acme-manager", "ci")


@pytest.mark.parametrize("role", ["viewer", "auditor"])
def test_below_manager_no_key_is_issued_revoked_or_rotated(cast, role) -> None:
    client = member(role)
    issued = client.post(
        "/admin/tenancy/apikey/add/", {"org": cast.acme.pk, "label": "x", "scopes": ["policy:read"]}
    )
    assert issued.status_code == HTTPStatus.FORBIDDEN
    pk = cast.acme_key.api_key.pk
    for action in ("revoke_selected", "rotate_selected"):
        client.post("/admin/tenancy/apikey/", {"action": action, "_selected_action": [pk]})
    assert ApiKey.objects.count() == 3
    assert api_key_authenticate(presented=cast.acme_key.secret) is not None


def test_a_manager_cannot_touch_another_orgs_keys(cast) -> None:
    pk = cast.globex_key.api_key.pk
    client = member("manager")
    for action in ("revoke_selected", "rotate_selected"):
        client.post("/admin/tenancy/apikey/", {"action": action, "_selected_action": [pk]})
    assert api_key_authenticate(presented=cast.globex_key.secret) is not None


def test_rotating_logs_both_keys(cast, root) -> None:
    old = cast.acme_key.api_key
    answer = root.post(
        "/admin/tenancy/apikey/", {"action": "rotate_selected", "_selected_action": [old.pk]}
    )
    assert answer.status_code == HTTPStatus.OK
    assert old.prefix in answer.content.decode()  # "replaces"
    new = ApiKey.objects.exclude(pk=old.pk).get(org=cast.acme, label="agent")
    assert logged("root", f"replaced by {new.prefix}")
    assert logged("root", f"API key {new.prefix} issued")


def test_revoking_is_logged(cast) -> None:
    member("manager").post(
        "/admin/tenancy/apikey/",
        {"action": "revoke_selected", "_selected_action": [cast.acme_key.api_key.pk]},
    )
    assert api_key_authenticate(presented=cast.acme_key.secret) is None
    assert logged("acme-manager", "Revoked")


# --- approver keys ------------------------------------------------------------------------------


def test_a_malformed_approver_key_is_a_form_error(cast) -> None:
    answer = member("manager").post(
        "/admin/approvals/approverkey/add/",
        {"org": cast.acme.pk, "public_key": "not-a-key", "key_id": "", "label": "z"},
    )
    assert answer.status_code == HTTPStatus.OK
    assert "public_key: not base64" in answer.content.decode()
    assert not ApproverKey.objects.exists()
    assert not LogEntry.objects.exists()


def test_an_operator_key_is_refused_as_approver_with_the_reason(cast, agents) -> None:
    answer = member("manager").post(
        "/admin/approvals/approverkey/add/",
        {"org": cast.acme.pk, "public_key": agents["acme"].identity, "key_id": "", "label": "z"},
        follow=True,
    )
    assert "it cannot approve them" in answer.content.decode()
    assert not ApproverKey.objects.exists()
    assert not LogEntry.objects.exists()  # the refusal rolled back: nothing recorded


def test_approver_keys_register_with_a_derived_id_and_revoke_per_org(cast, root) -> None:
    alice = Approver("alice")
    member("owner").post(
        "/admin/approvals/approverkey/add/",
        {"org": cast.acme.pk, "public_key": alice.public, "key_id": "", "label": "Alice"},
    )
    key = ApproverKey.objects.get(org=cast.acme)
    assert key.key_id.startswith("ak_")
    assert logged("acme-owner", key.key_id)
    globex = approver_key_register(org=cast.globex, public_key=Approver("g").public, key_id="g").key
    member("manager").post(
        "/admin/approvals/approverkey/",
        {"action": "revoke_selected", "_selected_action": [key.pk, globex.pk]},
    )
    key.refresh_from_db()
    globex.refresh_from_db()
    assert key.revoked_at is not None
    assert globex.revoked_at is None
    refused = member("viewer").post(
        "/admin/approvals/approverkey/",
        {"action": "revoke_selected", "_selected_action": [key.pk]},
    )
    assert refused.status_code == HTTPStatus.FOUND  # no such action for a viewer: the list again
    assert refused["Location"] == "/admin/approvals/approverkey/"


# --- members ------------------------------------------------------------------------------------


def test_a_manager_invites_members_up_to_their_own_role(cast) -> None:
    client = member("manager")
    added = client.post(
        "/admin/tenancy/membership/add/",
        {"org": cast.acme.pk, "email": "dana@acme.example", "role": "auditor"},
    )
    assert added.status_code == HTTPStatus.FOUND
    assert Invitation.objects.get(email="dana@acme.example").role == "auditor"
    assert logged("acme-manager", "dana")
    refused = client.post(
        "/admin/tenancy/membership/add/",
        {"org": cast.acme.pk, "email": "mallory@x.example", "role": "owner"},
        follow=True,
    )
    assert "cannot invite to the owner role" in refused.content.decode()
    assert not Invitation.objects.filter(email="mallory@x.example").exists()
    assert not logged("acme-manager", "mallory")


def test_a_manager_cannot_demote_an_owner_but_an_owner_can(cast) -> None:
    owner = Membership.objects.get(user__username="acme-owner")
    url = f"/admin/tenancy/membership/{owner.pk}/change/"
    member("manager").post(url, {"role": "viewer"}, follow=True)
    assert Membership.objects.get(pk=owner.pk).role == "owner"
    manager = Membership.objects.get(user__username="acme-manager")
    member("owner").post(f"/admin/tenancy/membership/{manager.pk}/change/", {"role": "auditor"})
    assert Membership.objects.get(pk=manager.pk).role == "auditor"
    assert logged("acme-owner", "as auditor")


def test_viewers_cannot_change_members_and_bad_addresses_are_form_errors(cast, root) -> None:
    answer = member("viewer").post(
        "/admin/tenancy/membership/add/",
        {"org": cast.acme.pk, "email": "v@x.example", "role": "viewer"},
    )
    assert answer.status_code == HTTPStatus.FORBIDDEN
    bad = root.post(
        "/admin/tenancy/membership/add/",
        {"org": cast.acme.pk, "email": "no spaces!", "role": "viewer"},
    )
    assert bad.status_code == HTTPStatus.OK
    assert "errorlist" in bad.content.decode()
    granted = root.post(
        "/admin/tenancy/membership/add/",
        {"org": cast.globex.pk, "email": "gina@globex.example", "role": "owner"},
    )
    assert granted.status_code == HTTPStatus.FOUND
    assert Invitation.objects.get(email="gina@globex.example").role == "owner"


# --- session tokens -----------------------------------------------------------------------------


def test_session_tokens_only_for_the_members_own_orgs(cast, root) -> None:
    answer = member("viewer").post(f"/admin/tenancy/org/{cast.globex.pk}/session-token/")
    assert answer.status_code == HTTPStatus.NOT_FOUND
    # A superuser who is no member of acme gets a refusal, not a token.
    refused = root.post(f"/admin/tenancy/org/{cast.acme.pk}/session-token/")
    assert refused.status_code == HTTPStatus.OK
    assert "only members of the org get a token" in refused.content.decode()
    assert (
        member("viewer").post(f"/admin/tenancy/org/{cast.acme.pk}/session-token/").status_code
        == 200
    )
    assert logged("acme-viewer", "session token")


# --- the admin log ------------------------------------------------------------------------------


def test_members_see_their_own_log_entries_and_nobody_edits_any(cast, root) -> None:
    member("manager").post(
        "/admin/tenancy/membership/add/",
        {"org": cast.acme.pk, "email": "dana@acme.example", "role": "viewer"},
    )
    root.post(f"/admin/tenancy/org/{cast.acme.pk}/change/",
              {"plan": Plan.PRO, "monthly_receipt_cap": "", "rate_per_minute": "",
               "rate_burst": ""})  # fmt: skip
    mine = LogEntry.objects.get(user__username="acme-manager")
    roots = LogEntry.objects.get(user__username="root")
    manager = member("manager")
    listing = manager.get("/admin/admin/logentry/").content.decode()
    assert "dana" in listing
    assert "Changed Plan" not in listing
    assert manager.get(f"/admin/admin/logentry/{roots.pk}/change/").status_code == 302
    for client in (root, manager):
        assert client.get("/admin/admin/logentry/add/").status_code == 403
        assert (
            client.post(f"/admin/admin/logentry/{mine.pk}/delete/", {"post": "yes"}).status_code
            == 403
        )
        client.post(f"/admin/admin/logentry/{mine.pk}/change/", {"change_message": "x"})
        bulk = {"action": "delete_selected", "_selected_action": [mine.pk], "post": "yes"}
        client.post("/admin/admin/logentry/", bulk)
    assert LogEntry.objects.get(pk=mine.pk).change_message == mine.change_message
    assert LogEntry.objects.count() == 2


# --- keys are never edited; evidence from the dashboard -----------------------------------------


@pytest.mark.parametrize(
    "page",
    ["/admin/tenancy/apikey/{key}/change/", "/admin/approvals/approverkey/{approver}/change/"],
    ids=["api-key", "approver-key"],
)
@pytest.mark.parametrize("who", ["superuser", "owner"])
def test_keys_are_issued_revoked_or_rotated_never_edited(cast, root, who, page) -> None:
    key = cast.acme_key.api_key
    approver = approver_key_register(org=cast.acme, public_key=Approver("a").public, key_id="a").key
    client = root if who == "superuser" else member("owner")
    url = page.format(key=key.pk, approver=approver.pk)
    assert client.post(url, {"label": "renamed"}).status_code == HTTPStatus.FORBIDDEN
    assert client.get(url).status_code == HTTPStatus.OK  # a read-only view
    assert ApiKey.objects.get(pk=key.pk).label == "agent"
    assert ApproverKey.objects.get(pk=approver.pk).label == ""


def test_an_auditor_downloads_the_evidence_tar_from_the_dashboard(cast, agents) -> None:
    import io
    import json
    import tarfile

    url = f"/admin/tenancy/org/{cast.acme.pk}/evidence/"
    auditor = member("auditor")
    assert url in auditor.get(f"/admin/tenancy/org/{cast.acme.pk}/dashboard/").content.decode()
    answer = auditor.post(url, {"from": "", "to": ""})
    assert answer.status_code == HTTPStatus.OK
    assert answer["Content-Type"] == "application/x-tar"
    with tarfile.open(fileobj=io.BytesIO(b"".join(answer.streaming_content))) as tar:
        manifest = json.load(tar.extractfile("evidence-acme/manifest.json"))  # type: ignore[arg-type]
    assert (manifest["org"], manifest["receipts"]) == ("acme", 2)
    assert logged("acme-auditor", "Exported evidence")
    bad = auditor.post(url, {"from": "2026-02-01", "to": "2026-01-01"}, follow=True)
    assert "from: must not be after to" in bad.content.decode()
    assert member("viewer").post(url).status_code == HTTPStatus.FORBIDDEN
    viewer_page = member("viewer").get(f"/admin/tenancy/org/{cast.acme.pk}/dashboard/")
    assert url not in viewer_page.content.decode()
    assert auditor.post(f"/admin/tenancy/org/{cast.globex.pk}/evidence/").status_code == 404
    assert auditor.get(url).status_code == HTTPStatus.METHOD_NOT_ALLOWED
