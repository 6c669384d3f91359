"""Console: approver keys (register, confirm a member's enrolled key, revoke) and the
approval queue (read-only: votes are signed on the approvers' devices)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.db.models import Prefetch, Q, QuerySet, prefetch_related_objects
from django.http import HttpRequest
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe
from unfold.widgets import UnfoldAdminTextInputWidget

from apps.approvals.content import approval_request
from apps.approvals.models import (
    COUNTED_VOTE,
    COUNTED_VOTES_ATTR,
    Approval,
    ApprovalEscalation,
    ApprovalStatus,
    ApprovalVote,
    ApproverKey,
    ApproverKeyState,
)
from apps.approvals.search import ApprovalSearch, approval_prefix_match, approval_search
from apps.approvals.selectors import (
    approval_roster,
    approvals_recently_decided,
    approver_key_name,
    approver_names,
)
from apps.approvals.services import (
    approval_escalation_set,
    approver_key_confirm,
    approver_key_register,
    approver_key_revoke,
    canonical_public_key,
)
from apps.common.errors import DomainError
from apps.common.stored_json import stored_value
from apps.receipts.admin import ApprovalLink, receipt_page_shows_approvals
from apps.receipts.models import MirrorEntry
from apps.tenancy.admin_access import OrgFilter, OrgScopedAdmin, can_write, writable_orgs
from apps.tenancy.admin_paging import KeysetAdmin, KeysetChangeList
from apps.tenancy.audit_trail import Actor
from apps.tenancy.models import Membership


class ApproverKeyRegisterForm(forms.ModelForm[ApproverKey]):
    key_id = forms.CharField(
        max_length=100,
        required=False,
        help_text="Empty: derived from the key.",
        widget=UnfoldAdminTextInputWidget,
    )

    class Meta:
        model = ApproverKey
        fields = ["org", "public_key", "key_id", "label"]
        help_texts = {"public_key": "The approver's Ed25519 public key, standard base64."}

    def clean_public_key(self) -> str:
        try:
            return canonical_public_key(self.cleaned_data.get("public_key") or "")
        except DomainError as error:
            raise forms.ValidationError(error.message) from None


class ApproverKeyStateFilter(admin.SimpleListFilter):
    title = "state"
    parameter_name = "state"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return list(ApproverKeyState.choices)

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        if value == ApproverKeyState.PENDING:
            return queryset.filter(revoked_at__isnull=True, confirmed_at__isnull=True)
        if value == ApproverKeyState.ACTIVE:
            return queryset.filter(revoked_at__isnull=True, confirmed_at__isnull=False)
        if value == ApproverKeyState.REVOKED:
            return queryset.filter(revoked_at__isnull=False)
        return queryset


@admin.register(ApproverKey)
class ApproverKeyAdmin(OrgScopedAdmin[ApproverKey]):
    """Approver keys. Members enroll their own from ``/approve/`` (pending); an owner or
    manager confirms them here, registers a key for a script, or revokes one."""

    list_display = [
        "key_id",
        "org",
        "holder",
        "label",
        "state_shown",
        "created_via",
        "created_at",
    ]
    list_filter = [ApproverKeyStateFilter, OrgFilter]
    search_fields = ["key_id", "label", "public_key", "member__username", "member__email"]
    actions = ["confirm_selected", "revoke_selected"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[ApproverKey]:
        return super().get_queryset(request).select_related("org", "member")

    @admin.display(description="Held by", ordering="member__username")
    def holder(self, obj: ApproverKey) -> str:
        if obj.member is None:
            return "-"
        return obj.member.get_full_name() or obj.member.get_username()

    @admin.display(description="State")
    def state_shown(self, obj: ApproverKey) -> str:
        return str(obj.state.label)

    @admin.action(description="Confirm selected pending keys (their votes count from now on)")
    def confirm_selected(self, request: HttpRequest, queryset: QuerySet[ApproverKey]) -> None:
        confirmed = 0
        for key in queryset:
            if not can_write(request, key.org_id):
                messages.error(request, f"{key.key_id}: needs the manager role in {key.org}")
                continue
            if key.state != ApproverKeyState.PENDING:
                messages.warning(request, f"{key.key_id}: {key.state.label.lower()}, not pending")
                continue
            approver_key_confirm(key=key, actor=Actor.console(request.user))
            confirmed += 1
        self.message_user(request, f"Confirmed {confirmed} key(s).", messages.SUCCESS)

    def get_form(
        self, request: HttpRequest, obj: ApproverKey | None = None, change: bool = False,
        **kwargs: Any,
    ) -> type[forms.ModelForm[ApproverKey]]:  # fmt: skip
        if obj is None:
            kwargs["form"] = ApproverKeyRegisterForm
        return super().get_form(request, obj, change, **kwargs)

    def get_readonly_fields(
        self, request: HttpRequest, obj: ApproverKey | None = None
    ) -> tuple[str, ...]:
        if obj is None:
            return ()
        return ("org", "key_id", "label", "public_key", "member", "created_by", "created_via",
                "created_at", "confirmed_at", "confirmed_by", "revoked_at")  # fmt: skip

    def has_change_permission(self, request: HttpRequest, obj: ApproverKey | None = None) -> bool:
        # A key is registered or revoked (the action), never edited.
        return False if obj is not None else super().has_change_permission(request, obj)

    def save_model(self, request: HttpRequest, obj: ApproverKey, form: Any, change: bool) -> None:
        # A refusal (the key signs the org's receipts, or is taken) propagates: the admin's
        # transaction rolls back and the page shows it (OrgScopedAdmin.changeform_view).
        key = approver_key_register(
            org=obj.org,
            public_key=obj.public_key,
            key_id=form.cleaned_data.get("key_id") or None,
            label=obj.label,
            actor=Actor.console(request.user),
        ).key
        obj.pk, obj.key_id = key.pk, key.key_id

    @admin.action(description="Revoke selected approver keys (their counted votes stay)")
    def revoke_selected(self, request: HttpRequest, queryset: QuerySet[ApproverKey]) -> None:
        revoked = 0
        for key in queryset:
            if not can_write(request, key.org_id):
                messages.error(request, f"{key.key_id}: needs the manager role in {key.org}")
                continue
            approver_key_revoke(org=key.org, key_id=key.key_id, actor=Actor.console(request.user))
            revoked += 1
        self.message_user(request, f"Revoked {revoked} key(s).", messages.SUCCESS)


@admin.register(Approval)
class ApprovalAdmin(KeysetAdmin, OrgScopedAdmin[Approval]):
    """The approval queue: read-only here; votes are signed on the approvers' devices.

    One org at a time, newest first, paged by (created_at, id) without a count: each status
    is a branch read through the (org, status, created_at) index (one when the status
    filter is on); an exact id, hash or session is read by its own index, and the flag
    filter or a rule or workflow prefix looks through a window (apps.tenancy.admin_paging).
    """

    # What each approval asks, readable at 1366 px: the org is a filter; the receipt and
    # the dates are on the approval's page; "Review and sign" opens the signing page.
    list_display = ["approval_shown", "asked", "rule_shown", "agent_shown", "roster_votes",
                    "time_left"]  # fmt: skip
    search_help_text = (
        "Finds a full approval id, action hash, ticket hash or session id, or a rule or "
        "workflow by the start of its name (among the next approvals)."
    )
    change_list_template = "admin/approvals/approval/change_list.html"
    list_filter = [OrgFilter, "status", "flag"]
    # The stock search is replaced (apps.approvals.search); these name what it finds.
    search_fields = ["=approval_id", "=action_hash", "=ticket_hash", "=session_id", "rule_id",
                     "workflow"]  # fmt: skip
    keyset = ("-created_at", "-id")
    keyset_params = frozenset({"org", "status"})
    # Up to one window a status branch: a windowed page reads at most 5 x 400 approvals.
    keyset_window = 400
    keyset_search_in_window = False
    list_per_page = 50
    readonly_fields = ["approval_id", "org", "asked", "rule_shown", "agent_shown", "time_left",
                       "receipt_link", "sign_link", "action_hash",
                       "ticket_hash", "status",
                       "waiting_for", "threshold", "roster_shown", "rule_id", "workflow",
                       "account", "context_shown", "producer_keys_shown", "approved_count",
                       "expires_at", "on_timeout", "flag",
                       "routing_hint", "created_at", "resolved_at", "reminded_at", "escalated_at",
                       "votes_and_history"]  # fmt: skip
    exclude = ["suspended_content", "access_token_digest", "provisional", "roster",
               "roster_frozen_at", "context", "producer_keys"]  # fmt: skip

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Approval | None = None) -> bool:
        return False

    def _search(self, request: HttpRequest, term: str) -> ApprovalSearch:
        """The search of the list's org for ``term``, once per request."""
        cached: ApprovalSearch | None = getattr(request, "_approval_search", None)
        if cached is None:
            org_id = self.list_org_id(request)
            cached = ApprovalSearch()
            if org_id is not None and term.strip():
                cached = approval_search(
                    queryset=self.get_queryset(request), org_id=org_id, term=term
                )
            request._approval_search = cached  # type: ignore[attr-defined]
        return cached

    def keyset_search_windowed(self, request: HttpRequest, term: str) -> bool:
        return bool(term.strip()) and self._search(request, term).windowed

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Approval], search_term: str
    ) -> tuple[QuerySet[Approval], bool]:
        if self.keyset_search_windowed(request, search_term):
            return queryset.filter(approval_prefix_match(search_term)), False
        return queryset, False

    def keyset_branches(
        self, request: HttpRequest, queryset: QuerySet[Any], changelist: KeysetChangeList
    ) -> list[QuerySet[Any]]:
        org_id = self.list_org_id(request)
        if org_id is None:
            return []
        if changelist.query and not self._search(request, changelist.query).windowed:
            return self._search(request, changelist.query).branches
        status = request.GET.get("status__exact", "")
        statuses = [status] if status else list(ApprovalStatus.values)
        rows = queryset.filter(org_id=org_id)
        return [rows.filter(status=value) for value in statuses]

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> Any:
        """The queue keeps the org's recently decided approvals beside the list."""
        response = super().changelist_view(request, extra_context)
        org_id = self.list_org_id(request)  # set by the list when the request had none
        context = getattr(response, "context_data", None)
        if context is not None:
            context["recently_decided"] = (
                approvals_recently_decided(approvals=self.get_queryset(request), org_id=org_id)
                if org_id is not None
                else []
            )
        return response

    def render_change_form(self, request: HttpRequest, context: dict[str, Any], *args: Any,
                           **kwargs: Any) -> Any:  # fmt: skip
        obj = context.get("original")
        if obj is not None:
            context["title"] = f"Approval {obj.approval_id}"  # a record, not a change
        return super().render_change_form(request, context, *args, **kwargs)

    def keyset_page_loaded(self, request: HttpRequest, rows: list[Any]) -> None:
        """What the queue's columns show beside each approval, for the whole page in three
        reads: the counted votes, the receipts, and the org's approver names."""
        if not rows:
            return
        prefetch_related_objects(
            rows,
            Prefetch(
                "votes",
                queryset=ApprovalVote.objects.filter(COUNTED_VOTE),
                to_attr=COUNTED_VOTES_ATTR,
            ),
        )
        receipts: dict[tuple[int, str], MirrorEntry] = {}
        for org_id in {row.org_id for row in rows}:
            hashes = [row.action_hash for row in rows if row.org_id == org_id]
            # One equality per hash, ORed, no order: each arm is a probe of the (org,
            # action_hash) index in a plan made for any values, where an IN list (or an
            # order by seq) makes it walk the org's entries.
            each = Q()
            for action_hash in hashes:
                each |= Q(org_id=org_id, action_hash=action_hash)
            found = MirrorEntry.objects.filter(each).order_by()
            for entry in found.only("pk", "seq", "org_id", "action_hash"):
                receipts[(org_id, entry.action_hash)] = entry
        names = {org_id: approver_names(org_id) for org_id in {row.org_id for row in rows}}
        for row in rows:
            row._page_receipt = receipts.get((row.org_id, row.action_hash))
            row._page_names = names[row.org_id]

    def breadcrumb(self, obj: Approval) -> str:
        return f"Approval {obj.approval_id} ({obj.status})"

    @admin.display(description="Approval", ordering="created_at")
    def approval_shown(self, obj: Approval) -> str:
        """ "Review and sign", then its id (which may wrap), status and receipt: one cell, so
        the queue fits 1366 px."""
        wrappable = format_html_join(
            mark_safe("<wbr>"), "{}",
            ((obj.approval_id[at : at + 8],) for at in range(0, len(obj.approval_id), 8)),
        )  # fmt: skip
        return format_html(
            '{}<br><a class="text-primary-600" href="{}">{}</a><br>{}<br>{}',
            self.review(obj), reverse("admin:approvals_approval_change", args=[obj.pk]),
            wrappable, self.status_shown(obj), self.receipt_link(obj),
        )  # fmt: skip

    @admin.display(description="What is asked")
    def asked(self, obj: Approval) -> str:
        """Verb and tool, then the decisive fields: amount, payee, target."""
        request = _request(obj)
        if not request["verb"]:
            return "the suspended receipt is not pushed yet"
        decisive = request["decisive"]
        amount = " ".join(filter(None, [decisive.get("amount"), decisive.get("currency")]))
        facts = [
            ("amount", amount), ("payee", decisive.get("payee")),
            ("target", decisive.get("target")),
        ]  # fmt: skip
        return format_html(
            "<strong>{} {}</strong>{}",
            request["verb"], request["tool"],
            format_html_join("", "<br>{}: {}", ((n, v) for n, v in facts if v)),
        )  # fmt: skip

    @admin.display(description="Rule and condition")
    def rule_shown(self, obj: Approval) -> str:
        request = _request(obj)
        rule = obj.rule_id or request["rule_id"] or "-"
        return format_html(
            '<code class="break-all">{}</code>{}', rule,
            format_html_join("", "<br>{}", ((condition,) for condition in request["matched"])),
        )  # fmt: skip

    @admin.display(description="Agent and workflow")
    def agent_shown(self, obj: Approval) -> str:
        request = _request(obj)
        agent = request["agent"]
        shown = format_html('<code title="{}">{}…</code>', agent, agent[:10]) if agent else "-"
        workflow = obj.workflow or request["workflow"]
        return format_html("{}<br>{}", shown, workflow) if workflow else shown

    @admin.display(description="Roster and votes")
    def roster_votes(self, obj: Approval) -> str:
        """Who may vote, by name, and how each voted; or what it still waits for."""
        waiting = self.waiting_for(obj)
        roster = approval_roster(obj) if obj.suspended_content else []
        names = getattr(obj, "_page_names", None)
        if names is None:
            names = approver_names(obj.org_id, roster)
        counted = getattr(obj, COUNTED_VOTES_ATTR, None)
        voted = (
            {vote.approver_public_key: vote.decision for vote in counted}
            if counted is not None
            else dict(obj.counted_votes().values_list("approver_public_key", "decision"))
        )
        people = format_html_join(
            "", "<br>{}: {}",
            ((names.get(key, key[:10] + "…"), voted.get(key, "not voted")) for key in roster),
        )  # fmt: skip
        return format_html("{}{}", waiting if waiting != "-" else obj.status, people)

    @admin.display(description="Time left", ordering="expires_at")
    def time_left(self, obj: Approval) -> str:
        if obj.status != ApprovalStatus.PENDING:
            return "-"
        left = obj.time_left_at(timezone.now())
        if left is None:
            return "no expiry"
        if not left:
            return "expired"
        minutes = int(left.total_seconds() // 60)
        hours, minutes = divmod(minutes, 60)
        days, hours = divmod(hours, 24)
        if days:
            return f"{days} d {hours} h left"
        return f"{hours} h {minutes} min left" if hours else f"{minutes} min left"

    @admin.display(description="")
    def review(self, obj: Approval) -> str:
        url = reverse("console-approval", args=[obj.approval_id])
        label = "Review and sign" if obj.status == ApprovalStatus.PENDING else "View"
        return format_html(
            '<a class="review-sign bg-primary-600 inline-block px-2 py-1 rounded-default '
            'text-white whitespace-nowrap" href="{}">{}</a>', url, label,
        )  # fmt: skip

    @admin.display(description="Context")
    def context_shown(self, obj: Approval) -> str:
        """The display context (matched conditions, scope) as lines of text, not JSON."""
        return _as_lines(obj.context) or "-"

    @admin.display(description="Producer keys")
    def producer_keys_shown(self, obj: Approval) -> str:
        return "\n".join(str(key) for key in obj.producer_keys or []) or "-"

    @admin.display(description="Links")
    def links(self, obj: Approval) -> str:
        """Its receipt and its signing page."""
        return format_html(
            '<span class="whitespace-nowrap">{} · {}</span>',
            self.receipt_link(obj), self.sign_link(obj),
        )  # fmt: skip

    @admin.display(description="Opened", ordering="created_at")
    def opened(self, obj: Approval) -> str:
        return format_html(
            '<span class="whitespace-nowrap">{}</span>', f"{obj.created_at:%Y-%m-%d %H:%M}"
        )

    @admin.display(description="Votes")
    def votes_shown(self, obj: Approval) -> str:
        return f"{obj.approved_count} of {obj.threshold}"

    @admin.display(description="Status", ordering="status")
    def status_shown(self, obj: Approval) -> str:
        """The status with its votes (one column for both: the list fits 1366 px)."""
        return f"{obj.status}, {obj.approved_count} of {obj.threshold} votes"

    @admin.display(description="Receipt")
    def receipt_link(self, obj: Approval) -> str:
        if hasattr(obj, "_page_receipt"):  # the list's page loaded it (keyset_page_loaded)
            entry = obj._page_receipt
        else:
            entry = (
                MirrorEntry.objects.filter(org_id=obj.org_id, action_hash=obj.action_hash)
                .only("pk", "seq")
                .first()
            )
        if entry is None:
            return "receipt not pushed yet"
        url = reverse("admin:receipts_mirrorentry_change", args=[entry.pk])
        return format_html('<a class="text-primary-600" href="{}">receipt #{}</a>', url, entry.seq)

    @admin.display(description="Signing page")
    def sign_link(self, obj: Approval) -> str:
        url = reverse("console-approval", args=[obj.approval_id])
        label = "sign" if obj.status == "pending" else "view"
        return format_html('<a class="text-primary-600" href="{}">{}</a>', url, label)

    @admin.display(description="Waiting for")
    def waiting_for(self, obj: Approval) -> str:
        """What a pending approval waits for: approver keys (none or too few registered and
        eligible yet), its suspended receipt (opened by the suspend ticket), or votes."""
        if obj.status != "pending":
            return "-"
        if not obj.suspended_content:
            return "the suspended receipt (opened by its hash; not pushed yet)"
        eligible = len(approval_roster(obj))
        if eligible < obj.threshold:
            return f"approver keys ({eligible} eligible, {obj.threshold} needed)"
        return f"votes ({obj.approved_count} of {obj.threshold})"

    @admin.display(description="Roster")
    def roster_shown(self, obj: Approval) -> str:
        roster_keys = approval_roster(obj)
        names = approver_names(obj.org_id, roster_keys)
        voted = dict(obj.counted_votes().values_list("approver_public_key", "decision"))
        roster = [
            f"{names.get(key, 'unknown key ' + key[:10] + '…')}: "
            + (voted.get(key, "not voted yet"))
            for key in roster_keys
        ]
        state = (
            f"frozen at the first vote, {obj.roster_frozen_at:%Y-%m-%d %H:%M:%S}"
            if obj.roster_frozen_at
            else "not frozen yet: the eligible keys now; it freezes at the first vote"
        )
        return "\n".join([*roster, f"({state})"])

    @admin.display(description="Votes and history")
    def votes_and_history(self, obj: Approval) -> str:
        names = approver_names(obj.org_id)
        votes = [
            f"{vote.voted_at:%Y-%m-%d %H:%M:%S} {vote.decision} by "
            f"{approver_key_name(vote.approver_key)}"
            + (" with its co-signed leg" if vote.record else " (no leg yet)")
            + (" (key since revoked)" if vote.approver_key.revoked_at else "")
            + (f": {vote.reason}" if vote.reason else "")
            + (f" [set aside, not counted: {vote.set_aside_reason}]" if vote.set_aside_at else "")
            for vote in obj.votes.select_related("approver_key__member")
        ]
        events = [
            f"{event.at:%Y-%m-%d %H:%M:%S} {event.kind}"
            + (f" {_event_detail(event.detail, names)}" if event.detail else "")
            for event in obj.events.all()
        ]
        return "\n".join([*votes, *events]) or "-"


def _request(obj: Approval) -> dict[str, Any]:
    """What the approval asks (``approval_request``), read once per row."""
    cached: dict[str, Any] | None = getattr(obj, "_request", None)
    if cached is None:
        content = stored_value(obj.suspended_content) if obj.suspended_content else None
        cached = approval_request(content)
        obj._request = cached  # type: ignore[attr-defined]
    return cached


def _as_lines(value: Any, indent: str = "") -> str:
    if isinstance(value, dict):
        return "\n".join(
            f"{indent}{name}:\n{_as_lines(item, indent + '  ')}"
            if isinstance(item, (dict, list)) and item
            else f"{indent}{name}: {_as_lines(item)}"
            for name, item in value.items()
        )
    if isinstance(value, list):
        if all(isinstance(item, dict) for item in value):
            return "\n".join(
                f"{indent}- " + ", ".join(f"{k} {v}" for k, v in item.items()) for item in value
            )
        return ", ".join(str(item) for item in value)
    return "" if value is None else str(value)


def _event_detail(detail: dict[str, Any], names: dict[str, str]) -> str:
    """An event's detail in words: ``provisional`` rather than ``provisional=True``; an
    approver (and a roster) by the person and device, not the raw key."""
    words = []
    for name, value in detail.items():
        label = name.replace("_", " ")
        if name == "approver" and isinstance(value, str):
            value = names.get(value, value)
        elif name == "roster" and isinstance(value, list):
            value = [names.get(key, key) for key in value]
        if value is True:
            words.append(label)
        elif value is False:
            words.append(f"not {label}")
        elif value not in (None, "", [], {}):
            shown = ", ".join(map(str, value)) if isinstance(value, list) else value
            words.append(f"{label}: {shown}")
    return f"({'; '.join(words)})" if words else ""


def _receipt_approval(entry: MirrorEntry) -> ApprovalLink | None:
    """The approval this receipt opened (a suspended receipt) or finalized (its L1 form,
    which supersedes the suspended one), if any."""
    hashes = [entry.action_hash, *([entry.supersedes_action_hash] if entry.supersedes_action_hash
                                   else [])]  # fmt: skip
    approval = Approval.objects.filter(org_id=entry.org_id, action_hash__in=hashes).first()
    if approval is None:
        return None
    return ApprovalLink(
        url=reverse("admin:approvals_approval_change", args=[approval.pk]),
        approval_id=approval.approval_id,
        status=approval.status,
        pending=approval.status == ApprovalStatus.PENDING,
    )


# The receipts page (a floor below) shows each receipt's approval through these.
receipt_page_shows_approvals(link=_receipt_approval, approver_names=approver_names)


class ApprovalEscalationForm(forms.ModelForm[ApprovalEscalation]):
    escalation_members = forms.ModelMultipleChoiceField(
        queryset=get_user_model().objects.none(), required=False,
        help_text="Members emailed when an approval is escalated (webhook endpoints subscribe "
        "to approval.escalated under Webhook endpoints).",
    )  # fmt: skip

    class Meta:
        model = ApprovalEscalation
        fields = ["org", "rule_id", "remind_every_minutes", "escalate_before_minutes"]


@admin.register(ApprovalEscalation)
class ApprovalEscalationAdmin(OrgScopedAdmin[ApprovalEscalation]):
    """How the org chases pending approvals, per rule id (empty: every other rule)."""

    list_display = ["rule_shown", "org", "remind_every_minutes", "escalate_before_minutes",
                    "escalation_list"]  # fmt: skip
    list_filter = [OrgFilter]
    form = ApprovalEscalationForm
    fields = ["org", "rule_id", "remind_every_minutes", "escalate_before_minutes",
              "escalation_members"]  # fmt: skip

    def get_form(
        self, request: HttpRequest, obj: ApprovalEscalation | None = None, change: bool = False,
        **kwargs: Any,
    ) -> type[forms.ModelForm[ApprovalEscalation]]:  # fmt: skip
        form = super().get_form(request, obj, change, **kwargs)
        # Only the members of the orgs this user manages can be on a list.
        members = Membership.objects.filter(org__in=writable_orgs(request)).values("user_id")
        field = form.base_fields["escalation_members"]
        field.queryset = get_user_model().objects.filter(pk__in=members)  # type: ignore[attr-defined]
        if obj is not None:
            field.initial = obj.escalate_to
        return form

    @admin.display(description="Rule", ordering="rule_id")
    def rule_shown(self, obj: ApprovalEscalation) -> str:
        return obj.rule_id or "every other rule"

    @admin.display(description="Escalation list")
    def escalation_list(self, obj: ApprovalEscalation) -> str:
        users = get_user_model().objects.filter(pk__in=obj.escalate_to)
        return ", ".join(sorted(user.get_username() for user in users)) or "-"

    def save_model(
        self, request: HttpRequest, obj: ApprovalEscalation, form: Any, change: bool
    ) -> None:
        saved = approval_escalation_set(
            org=obj.org, rule_id=obj.rule_id,
            remind_every_minutes=obj.remind_every_minutes,
            escalate_before_minutes=obj.escalate_before_minutes,
            escalate_to=[user.pk for user in form.cleaned_data.get("escalation_members") or []],
            actor=Actor.console(request.user),
        )  # fmt: skip
        obj.pk = saved.pk
