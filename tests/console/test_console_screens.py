"""Every console screen at 1366 x 768 in headless Chromium, over the demo data plus what the
SDK steps of docs/sdk.md add (an L1 receipt with its approval, a suspended receipt with a pending
approval, webhooks with deliveries): nothing scrolls sideways, no list's table overflows its
container, every editable field has a visible control, no raw JSON runs off the page.

The screens are found, not listed: every model the admin site registers (its list, its add
page, its first object's page, its history, and each extra page its admin routes), and every
GET route of the console's own URL conf. A new screen is covered without touching this file.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from http import HTTPStatus
from pathlib import Path
from typing import Any

import pytest
from django.contrib import admin
from django.contrib.admin.models import ADDITION, LogEntry
from django.urls import URLPattern, reverse
from django.urls.converters import IntConverter
from rest_framework.test import APIClient

from apps.approvals.models import Approval
from apps.approvals.services import approver_key_register
from apps.approvals.tokens import assemble_l1_from_parts
from apps.console import urls as console_urls
from apps.console.demo import Demo, demo_bootstrap
from apps.events.models import Delivery, EventType, WebhookEndpoint
from apps.events.services import webhook_endpoint_create
from apps.policy.models import PolicyVersion
from apps.policy.services import policy_deploy
from apps.receipts.models import MirrorEntry
from apps.tenancy.models import Plan, Role
from apps.tenancy.services import (
    invitation_create,
    membership_add,
    org_create,
    org_set_policy_quorum,
)
from apps.tenancy.services.invitations import invitation_token
from tests.approvals.conftest import Approver, suspended_receipt
from tests.events.conftest import Receiver, work
from tests.events.conftest import receiver as receiver  # the real local webhook receiver
from tests.policy.test_policy_api import rule_toml
from tests.receipts.conftest import Pusher
from tests.receipts.factories import Agent

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

WIDTH, HEIGHT = 1366, 768
SCOPE = "payments.review"
# make screenshots sets this: every screen visited is saved there as a full-page PNG.
SHOTS = Path(os.environ["CONSOLE_SCREENSHOTS"]) if os.environ.get("CONSOLE_SCREENSHOTS") else None
# Extra pages whose route needs a query to show anything (a comparison of two versions).
QUERIES = {"policy_policyversion_compare": "?old={old}&new={new}"}

# What a user sees wrong at this size, as a list of sentences (empty: the screen is fine).
LAYOUT_PROBLEMS = """() => {
  const problems = [];
  const width = window.innerWidth;
  const page = document.documentElement.scrollWidth;
  const describe = e => `${e.tagName.toLowerCase()}${e.id ? '#' + e.id : ''}`
      + `${e.name ? '[name=' + e.name + ']' : ''}`
      + `.${String(e.className).split(' ').slice(0, 3).join('.')}`;
  if (page > width) {
    // Name the innermost elements that reach past the edge: where to look.
    const past = [...document.querySelectorAll('body *')].filter(
      e => e.getBoundingClientRect().right > width + 1 && getComputedStyle(e).position !== 'fixed');
    const innermost = past.filter(e => !past.some(o => o !== e && e.contains(o)));
    const where = innermost.slice(0, 3).map(e => describe(e)).join(', ');
    problems.push(`the page is ${page} px wide: ${where}`);
  }
  const visible = e => e.getClientRects().length > 0 && getComputedStyle(e).visibility !== 'hidden';
  // A scroll container (a list's table, a code block) wider inside than on screen.
  for (const e of document.querySelectorAll('body *')) {
    const style = getComputedStyle(e);
    if (!visible(e) || e.clientWidth === 0 || ['TEXTAREA', 'SELECT'].includes(e.tagName)) continue;
    if (['auto', 'scroll'].includes(style.overflowX) && e.scrollWidth > e.clientWidth + 1)
      problems.push(`${describe(e)} scrolls sideways (${e.scrollWidth} > ${e.clientWidth})`);
  }
  // Raw text blocks (JSON, TOML, tokens) that run past the page's right edge.
  for (const e of document.querySelectorAll('pre, code, td, th')) {
    if (!visible(e)) continue;
    const right = e.getBoundingClientRect().right;
    if (right > width + 1) problems.push(`${describe(e)} ends at ${Math.round(right)} px`);
  }
  // Every editable field is a visible control: a border distinct from what is behind it,
  // or a background of its own.
  const rgb = c => (c.match(/[\\d.]+/g) || []).map(Number);
  const opaque = c => {
    const v = rgb(c);
    return v.length === 3 || (v.length === 4 && v[3] > 0.05);
  };
  const behind = e => {
    for (let p = e.parentElement; p; p = p.parentElement) {
      const c = getComputedStyle(p).backgroundColor;
      if (opaque(c)) return c;
    }
    return 'rgb(255, 255, 255)';
  };
  const differ = (a, b) => { const x = rgb(a), y = rgb(b);
    return Math.abs(x[0] - y[0]) + Math.abs(x[1] - y[1]) + Math.abs(x[2] - y[2]) > 15; };
  const skip = ['hidden', 'submit', 'button', 'reset', 'image', 'file'];
  // A field drawn inside a bordered box of its own size (the theme's search bar) is that box.
  const framed = (e, back) => {
    const inner = e.getBoundingClientRect();
    for (let p = e.parentElement, n = 0; p && n < 2; p = p.parentElement, n++) {
      const box = p.getBoundingClientRect(), style = getComputedStyle(p);
      if (box.height > inner.height + 24 || box.width > inner.width + 80) return false;
      if (parseFloat(style.borderTopWidth) > 0 && differ(style.borderTopColor, back)) return true;
    }
    return false;
  };
  for (const e of document.querySelectorAll('input, select, textarea')) {
    if (skip.includes(e.type) || !visible(e) || e.readOnly || e.disabled) continue;
    const style = getComputedStyle(e);
    if (['checkbox', 'radio'].includes(e.type) && style.appearance !== 'none') continue;
    const back = behind(e);
    const border = ['Top', 'Right', 'Bottom', 'Left'].every(side =>
      parseFloat(style[`border${side}Width`]) > 0 && differ(style[`border${side}Color`], back));
    const filled = opaque(style.backgroundColor) && differ(style.backgroundColor, back);
    if (!border && !filled && !framed(e, back))
      problems.push(`${describe(e)} has no visible border or background`);
  }
  return [...new Set(problems)];
}"""


@dataclass
class Console:
    demo: Demo
    l1: MirrorEntry  # the approved payment's L1 receipt (supersedes the suspended one)
    suspended: MirrorEntry  # a payment still waiting: its approval is pending
    approved: Approval
    pending: Approval


def _sdk_client(secret: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_X_API_KEY=secret)
    return client


def _l1_by_the_sdk_steps(demo: Demo, agent: Agent, approver: Approver) -> str:
    """The approval steps of docs/sdk.md: push the suspended receipt, vote with a co-signed leg,
    fetch the assembly, finalize the L1 receipt and push it superseding the suspended one."""
    push = Pusher(APIClient(), demo.api_key)
    sdk = _sdk_client(demo.api_key)
    suspended = suspended_receipt(agent)
    content = suspended["content"]
    action_hash = content["action_hash"]
    assert push(suspended).status_code == HTTPStatus.CREATED
    record, co_sig = approver.leg(content)
    body = {"token_b64": approver.token(content, scope=SCOPE), "action_content": content,
            "record": record, "co_sig_b64": co_sig}  # fmt: skip
    voted = sdk.post(f"/v1/approvals/{action_hash}/submit-token", body, format="json")
    assert voted.status_code == HTTPStatus.OK, voted.json()
    assembly = sdk.get(f"/v1/approvals/{action_hash}/assembly").json()
    leg = assembly["legs"][0]
    l1 = assemble_l1_from_parts(
        agent.key,
        suspended_content=assembly["suspended_content"],
        record=leg["record"],
        approver_pubkey_b64=leg["approver_pubkey_b64"],
        co_sig_b64=leg["co_sig_b64"],
    )
    assert push(l1, supersedes=action_hash).status_code == HTTPStatus.CREATED
    return str(l1["content"]["action_hash"])


@pytest.fixture
def console(tmp_path: Path, receiver: Receiver) -> Console:
    demo = demo_bootstrap(slug="demo", username="demo", state_dir=tmp_path)
    org = demo.org
    # Webhooks first, so that what follows is delivered: one receiver answering, one
    # endpoint nobody listens on (its deliveries wait for their next attempt).
    everything = [str(value) for value in EventType]
    path = "/team-operations/approvals-and-payments/countersign-webhook-receiver-endpoint"
    answered = webhook_endpoint_create(org=org, url=receiver.url + path, event_types=everything,
                                       description="Operations receiver")  # fmt: skip
    receiver.secrets.append(answered.secret)
    webhook_endpoint_create(org=org, url="http://127.0.0.1:9/unreachable" + path,
                            event_types=everything, description="Nobody listens here")  # fmt: skip
    alice = Approver("alice")
    approver_key_register(org=org, public_key=alice.public, key_id="alice", label="Alice Martin")
    agent = Agent()
    l1_hash = _l1_by_the_sdk_steps(demo, agent, alice)
    # A second policy version: a diff, a rollback, a comparison.
    policy_deploy(org=org, toml=rule_toml("search.allow", "tool_call", "allow"))
    # A console addition, as the admin logs it.
    LogEntry.objects.log_actions(
        user_id=_demo_user_id(demo),
        queryset=[org], action_flag=ADDITION, change_message=[{"added": {}}],
    )  # fmt: skip
    work(until=lambda: Delivery.objects.filter(status="succeeded").exists())
    l1 = MirrorEntry.objects.get(org=org, action_hash=l1_hash)
    approved = Approval.objects.get(org=org, action_hash=l1.supersedes_action_hash)
    pending = Approval.objects.get(org=org, status="pending")
    suspended = MirrorEntry.objects.get(org=org, action_hash=pending.action_hash)
    return Console(demo=demo, l1=l1, suspended=suspended, approved=approved, pending=pending)


def _demo_user_id(demo: Demo) -> int:
    from django.contrib.auth import get_user_model

    return int(get_user_model().objects.get(username=demo.username).pk)


@pytest.fixture(scope="module")
def screen(browser: Any) -> Iterator[Any]:
    """One page for the module, at 1366 x 768."""
    context = browser.new_context(viewport={"width": WIDTH, "height": HEIGHT})
    page = context.new_page()
    page.set_default_timeout(30_000)
    yield page
    context.close()


def sign_in(page: Any, live_server: Any, username: str, password: str) -> None:
    page.context.clear_cookies()
    page.goto(f"{live_server.url}/admin/login/?next=/admin/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("button[type=submit], input[type=submit]")
    page.wait_for_load_state()


STANDARD = ("_changelist", "_add", "_change", "_delete", "_history", "_autocomplete")


def _first(model: Any) -> Any:
    return model._default_manager.order_by("pk").first()


def _arguments(pattern: URLPattern) -> int:
    return len(pattern.pattern.converters)


def console_screens(extra: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(name, path) of every GET screen: each registered model's list, add page, first
    object's page and history, its admin's own routes, and the console's URL conf."""
    for model, model_admin in admin.site._registry.items():
        meta = model._meta
        name = f"{meta.app_label}_{meta.model_name}"
        first = _first(model)
        yield f"{name} list", reverse(f"admin:{name}_changelist")
        yield f"{name} add", reverse(f"admin:{name}_add")
        if first is not None:
            yield f"{name} page", reverse(f"admin:{name}_change", args=[first.pk])
            yield f"{name} history", reverse(f"admin:{name}_history", args=[first.pk])
        for pattern in model_admin.get_urls():
            if not isinstance(pattern, URLPattern) or not pattern.name:
                continue
            if pattern.name.endswith(STANDARD):
                continue
            if _arguments(pattern) and first is None:
                continue
            args = [extra.get(str(pattern.name), first.pk)] * _arguments(pattern)
            query = QUERIES.get(pattern.name, "").format(**extra)
            yield pattern.name, reverse(f"admin:{pattern.name}", args=args) + query
    for pattern in console_urls.urlpatterns:
        assert isinstance(pattern, URLPattern)
        # A named screen's own argument (an invitation's token), an approval's reference,
        # or a row id (a device's: the POST-only routes answer 405).
        args = [
            extra[str(pattern.name)] if str(pattern.name) in extra
            else 0 if isinstance(converter, IntConverter) else extra["approval_id"]
            for converter in pattern.pattern.converters.values()
        ]  # fmt: skip
        yield f"console {pattern.name}", reverse(pattern.name, args=args)


def layout_problems(page: Any) -> list[str]:
    problems: list[str] = page.evaluate(LAYOUT_PROBLEMS)
    return problems


def visit(page: Any, url: str) -> int:
    """The screen's status; a page answering 200 with HTML is then loaded in the browser."""
    answer = page.request.get(url)
    if answer.status == HTTPStatus.OK and "text/html" in answer.headers.get("content-type", ""):
        loaded = page.goto(url)
        assert loaded is not None
        return int(loaded.status)
    return -answer.status if answer.status == HTTPStatus.OK else answer.status


def test_every_console_screen_fits_1366_px_with_visible_fields(
    screen, live_server, console
) -> None:
    sign_in(screen, live_server, console.demo.username, console.demo.password)
    versions = list(
        PolicyVersion.objects.filter(org=console.demo.org)
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    invited = invitation_create(org=console.demo.org, email="new@example.com", role="viewer")
    # A co-signed policy change waiting for its approvers: its signing page.
    org_set_policy_quorum(org=console.demo.org, quorum=1)
    proposed = policy_deploy(
        org=console.demo.org, toml=rule_toml("fetch.allow", "tool_call", "allow")
    )
    assert proposed.proposal is not None
    policy_id = proposed.version.policy_id
    extra = {"old": versions[0], "new": versions[-1], "approval_id": console.pending.approval_id,
             "console-invitation": invitation_token(invited),
             "console-policy-proposal": policy_id,
             "console-policy-proposal-vote": policy_id,
             "policy_policyversion_replay": proposed.proposal.replay["replay_id"]}  # fmt: skip
    # The receipts the issue names, beside each model's first object.
    screens = [
        *console_screens(extra),
        ("L1 receipt", reverse("admin:receipts_mirrorentry_change", args=[console.l1.pk])),
        ("suspended receipt",
         reverse("admin:receipts_mirrorentry_change", args=[console.suspended.pk])),
        ("approved approval", reverse("admin:approvals_approval_change",
                                      args=[console.approved.pk])),
        ("index", reverse("admin:index")),
    ]  # fmt: skip
    seen, found = 0, {}
    for name, path in screens:
        status = visit(screen, live_server.url + path)
        if status in (HTTPStatus.FORBIDDEN, HTTPStatus.METHOD_NOT_ALLOWED):
            continue  # not a page for this user, or a form's POST target
        if status == -HTTPStatus.OK:
            continue  # a download
        assert status == HTTPStatus.OK, (name, path, status)
        seen += 1
        if SHOTS:  # make screenshots: what a user sees, for review
            SHOTS.mkdir(parents=True, exist_ok=True)
            slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
            screen.screenshot(path=str(SHOTS / f"{slug}.png"), full_page=True)
        problems = layout_problems(screen)
        if problems:
            found[f"{name} ({path})"] = problems
    assert seen > 40
    assert found == {}, json.dumps(found, indent=1)


def _assert_fits(page: Any, name: str) -> None:
    if SHOTS:
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)
    assert layout_problems(page) == [], name


def _in_view(page: Any, selector: str) -> bool:
    """The element is inside the window and on top there (no sticky bar over it)."""
    return bool(
        page.evaluate(
            """(selector) => {
                const e = document.querySelector(selector);
                const box = e.getBoundingClientRect();
                const outside = box.top < 0 || box.bottom > window.innerHeight;
                if (outside || box.height === 0) return false;
                const x = box.left + box.width / 2, y = box.top + box.height / 2;
                const hit = document.elementFromPoint(x, y);
                return e.contains(hit);
            }""",
            selector,
        )
    )


FLOOR_BYPASS = "# a payment without a human: the floor refuses it\n" + rule_toml(
    "payments.free", "payment", "allow"
)


def test_a_refused_policy_shows_its_error_in_view_at_its_line(screen, live_server, console):
    sign_in(screen, live_server, console.demo.username, console.demo.password)
    add = live_server.url + reverse("admin:policy_policyversion_add")
    example = (Path(__file__).parents[2] / "deploy" / "examples" / "policy.toml").read_text()
    lines = example.splitlines()
    broken = "\n".join([*lines[:30], "bogus = ]", *lines[30:]])
    for text, line, says in [(broken, 31, "not valid TOML"), (FLOOR_BYPASS, 3, "payments.free")]:
        screen.goto(add)
        screen.select_option("#id_org", label=str(console.demo.org))
        screen.fill("#id_toml", text)
        screen.click("button[name=_save]")
        screen.wait_for_selector("#policy-error")
        error = screen.inner_text("#policy-error")
        assert says in error
        assert f"line {line}: {text.splitlines()[line - 1]}" in error
        assert _in_view(screen, "#policy-error"), error
        # The caret is on that line of the text.
        selected = screen.evaluate(
            "(() => { const a = document.getElementById('id_toml');"
            " return a.value.slice(a.selectionStart, a.selectionEnd); })()"
        )
        assert selected == text.splitlines()[line - 1]
        _assert_fits(screen, "policy-refused")
    # The preview shows it the same way.
    screen.goto(live_server.url + reverse("admin:policy_policyversion_preview"))
    screen.select_option("#id_org", label=str(console.demo.org))
    screen.fill("#id_toml", FLOOR_BYPASS)
    screen.click("#preview-form [type=submit]")
    screen.wait_for_selector("#policy-error")
    assert "line 3:" in screen.inner_text("#policy-error")
    assert _in_view(screen, "#policy-error")


def _cells_apart(page: Any, selector: str) -> bool:
    """Every cell of the table has room around its text (cells do not run together)."""
    return bool(
        page.evaluate(
            """(selector) => [...document.querySelectorAll(selector + ' td, ' + selector + ' th')]
                .every(c => parseFloat(getComputedStyle(c).paddingLeft) >= 4
                            && parseFloat(getComputedStyle(c).paddingRight) >= 4)""",
            selector,
        )
    )


def test_the_pages_shown_once_and_the_preview_are_finished(screen, live_server, console) -> None:
    sign_in(screen, live_server, console.demo.username, console.demo.password)
    # A new API key: the callout, the key, and the SDK's configure line with both filled in.
    screen.goto(live_server.url + reverse("admin:tenancy_apikey_add"))
    screen.select_option("#id_org", label=str(console.demo.org))
    screen.fill("#id_label", "billing agent")
    screen.click("button[name=_save]")
    screen.wait_for_selector("#copy-now")
    assert "Copy this key now" in screen.inner_text("#copy-now")
    secret = screen.inner_text(".one-time-secret").strip()
    assert secret.startswith("hk_")
    configure = f'heso.cloud.configure(api_key="{secret}", endpoint="{live_server.url}")'
    assert screen.inner_text(".sdk-configure").strip() == configure
    assert screen.locator(f"button.copy-button[data-copy='{configure}']").count() == 1
    assert _cells_apart(screen, "table.console-table")
    _assert_fits(screen, "api-key-issued")
    # A webhook endpoint's secret.
    screen.goto(live_server.url + reverse("admin:events_webhookendpoint_add"))
    screen.select_option("#id_org", label=str(console.demo.org))
    screen.fill("#id_url", "http://127.0.0.1:9/another/receiver")
    screen.check("input[name=event_types][value='approval.decided']")
    screen.click("button[name=_save]")
    screen.wait_for_selector("#copy-now")
    assert "Copy this signing secret now" in screen.inner_text("#copy-now")
    assert screen.inner_text(".one-time-secret").strip().startswith("whsec_")
    assert _cells_apart(screen, "table.console-table")
    _assert_fits(screen, "webhook-secret")
    # A dashboard session token.
    screen.goto(
        live_server.url + reverse("admin:tenancy_org_dashboard", args=[console.demo.org.pk])
    )
    screen.click("text=Get a dashboard session token for scripts")
    screen.wait_for_selector("#copy-now")
    assert "Copy these tokens now" in screen.inner_text("#copy-now")
    assert screen.locator(".one-time-secret").count() == 2
    assert _cells_apart(screen, "table.console-table")
    _assert_fits(screen, "session-token")
    # The policy preview: its report in the console's cards and tables.
    screen.goto(live_server.url + reverse("admin:policy_policyversion_preview"))
    screen.select_option("#id_org", label=str(console.demo.org))
    screen.fill("#id_toml", rule_toml("search.block", "tool_call", "block"))
    screen.click("#preview-form [type=submit]")
    screen.wait_for_selector("#preview-report")
    assert "decisions would change" in screen.inner_text("#preview-report")
    headers = screen.locator("#preview-flips th").all_inner_texts()
    assert headers == ["Active rule", "Proposed rule", "Decision", "Receipts", "Examples"]
    assert _cells_apart(screen, "#preview-flips")
    assert _cells_apart(screen, "#preview-transitions")
    _assert_fits(screen, "policy-preview-report")


def _sidebar_groups(page: Any) -> list[str]:
    titles: list[str] = page.locator("#nav-sidebar-apps h2").all_inner_texts()
    return [title.strip() for title in titles]


def test_signing_in_lands_on_the_org_and_the_sidebar_is_grouped_by_job(
    screen, live_server, console
) -> None:
    # The demo's owner (one org, a superuser): its dashboard, and the System group.
    sign_in(screen, live_server, console.demo.username, console.demo.password)
    org = console.demo.org
    assert screen.url.endswith(reverse("admin:tenancy_org_dashboard", args=[org.pk]))
    jobs = ["Receipts", "Approvals", "Policy", "Keys and members", "Notifications",
            "Transparency"]  # fmt: skip
    assert _sidebar_groups(screen) == [*jobs, "System"]
    sidebar = screen.inner_text("#nav-sidebar-apps")
    assert "Witnesses" in sidebar
    assert "Witnesss" not in sidebar
    screen.goto(live_server.url + reverse("admin:transparency_witness_changelist"))
    assert "Witnesss" not in screen.inner_text("body")
    system = screen.locator("#nav-sidebar-apps > div", has_text="System").inner_text()
    for internal in ("Admin log", "Groups", "Background task results", "Issued refresh tokens"):
        assert internal in system
    # A member of two orgs picks one; internal tables are not theirs to see.
    other = org_create(slug="second", name="Second org", plan=Plan.FREE)
    membership_add(org=org, username="two-orgs", role=Role.MANAGER, password="pw-two")
    membership_add(org=other, username="two-orgs", role=Role.VIEWER)
    sign_in(screen, live_server, "two-orgs", "pw-two")
    assert screen.url.endswith(reverse("admin:index"))
    picker = screen.inner_text("#org-dashboards")
    assert "demo dashboard" in picker
    assert "second dashboard" in picker
    assert _sidebar_groups(screen) == jobs
    assert "Log entries" not in screen.inner_text("#content")  # not Django's list of models
    for path in ("/admin/auth/group/", "/admin/django_tasks_database/dbtaskresult/"):
        assert visit(screen, live_server.url + path) == HTTPStatus.FORBIDDEN
    # An empty list says what the thing is and gives the one thing that creates it.
    screen.goto(f"{live_server.url}/admin/audit/evidenceexportjob/")
    empty = screen.inner_text("#empty-state")
    assert "No evidence export jobs yet" in empty
    assert "archives of an org's receipts" in empty
    assert "yielded" not in empty
    assert "Reset filters" not in empty
    assert screen.locator("#empty-state a", has_text="Add evidence export job").count() == 1
    screen.goto(f"{live_server.url}/admin/transparency/checkpoint/")
    assert "manage.py publish_checkpoint" in screen.inner_text("#empty-state")
    screen.goto(f"{live_server.url}/admin/receipts/mirrorentry/?q=no-such-thing")
    assert "match “no-such-thing”" in screen.inner_text("#empty-state")


BREADCRUMB_IDENTIFIERS = re.compile(r"^\d+#\d+|\b(Apr|Pol|Ep)_")


def test_pages_speak_words_not_identifiers(screen, live_server, console) -> None:
    sign_in(screen, live_server, console.demo.username, console.demo.password)
    org = console.demo.org
    versions = PolicyVersion.objects.filter(org=org).order_by("pk")
    endpoint = WebhookEndpoint.objects.filter(org=org).order_by("pk").first()
    assert endpoint is not None
    pages = {
        "receipt": reverse("admin:receipts_mirrorentry_change", args=[console.l1.pk]),
        "approval": reverse("admin:approvals_approval_change", args=[console.approved.pk]),
        "policy": reverse("admin:policy_policyversion_change", args=[versions.last().pk]),
        "endpoint": reverse("admin:events_webhookendpoint_change", args=[endpoint.pk]),
    }
    for name, path in pages.items():
        screen.goto(live_server.url + path)
        header = screen.inner_text("#page-crumbs")
        assert not BREADCRUMB_IDENTIFIERS.search(header), (name, header)
    screen.goto(live_server.url + pages["receipt"])
    assert f"Receipt #{console.l1.seq}: tool_call search" in screen.inner_text("#page-crumbs")
    text = screen.inner_text("#content")
    assert "Valid at L1 (the receipt verifies" in text
    # The L1 receipt's approval: fields, the approver by name, and a link; raw JSON folded.
    fields = screen.inner_text(".approval-fields")
    for shown in ("Alice Martin (alice)", "Decided at", "Reason"):
        assert shown in fields
    assert screen.locator(f".approval-fields a:text-is('{console.approved.approval_id}')").count()
    assert screen.locator("details.raw-json").count() == 1
    assert not screen.locator("details.raw-json pre").is_visible()
    # The suspended receipt's summary agrees with its links: pending, not "none".
    screen.goto(live_server.url + reverse("admin:receipts_mirrorentry_change",
                                          args=[console.suspended.pk]))  # fmt: skip
    summary = screen.inner_text(".approval-fields")
    assert "pending" in summary
    assert console.pending.approval_id in summary
    # The vote history in words.
    screen.goto(live_server.url + pages["approval"])
    history = screen.inner_text("#content")
    assert "opened" in history  # the history is there
    assert "=True" not in history
    assert "=False" not in history
    # The active version offers no rollback to itself; an older one does.
    screen.goto(live_server.url + pages["policy"])
    assert screen.locator("text=Roll back to this version").count() == 0
    assert screen.locator("text=Active version").count() == 1
    screen.goto(live_server.url + reverse("admin:policy_policyversion_change",
                                          args=[versions.first().pk]))  # fmt: skip
    assert screen.locator("text=Roll back to this version").count() == 1
    # The admin log in words.
    screen.goto(live_server.url + reverse("admin:admin_logentry_changelist"))
    log = screen.inner_text("#result_list")
    assert '[{"added"' not in log
    assert "Added." in log
    # One quota format on the dashboard.
    screen.goto(live_server.url + reverse("admin:tenancy_org_dashboard", args=[org.pk]))
    quota = screen.inner_text("#quota-shown")
    card = screen.locator(".card", has_text="Receipts this month").inner_text()
    assert quota.split(" receipts")[0] in card
    # A delivered webhook has no "next attempt".
    delivered = Delivery.objects.filter(status="succeeded").first()
    assert delivered is not None
    screen.goto(live_server.url + reverse("admin:events_delivery_change", args=[delivered.pk]))
    assert "Next attempt" not in screen.inner_text("#content")
    assert "Delivered at" in screen.inner_text("#content")
    # /verify: a verdict keeps its name and says what it means.
    text = json.dumps(Agent().receipt())
    tampered = text.replace('"weather"', '"weathers"')
    screen.goto(live_server.url + reverse("console-verify"))
    screen.fill("#input", tampered)
    screen.click("#verify")
    screen.wait_for_selector("#result[data-summary='HashMismatch']")
    shown = screen.inner_text("#result")
    assert "HashMismatch" in shown
    assert "the content was changed after it was hashed" in shown
    assert "NoTrustedTime" not in shown or "captured_at is the agent's own claim" in shown
