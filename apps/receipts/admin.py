"""Console: the mirrored receipts, read-only, readable, and re-verifiable on demand."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from django.contrib import admin, messages
from django.db.models import Q, QuerySet
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseNotAllowed,
    HttpResponseRedirect,
)
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from apps.common.vocabulary import DECISION_PATHS, LIFECYCLE_KINDS, VERBS
from apps.receipts.mirror_chain import EMPTY_CHAIN_HEAD, chain_hash, receipt_digest
from apps.receipts.models import MirrorEntry, MirrorHead
from apps.receipts.search import MirrorSearch, mirror_search, seq_range_received
from apps.receipts.selectors import is_retired, stored_level_holds
from apps.receipts.verifier import verify_receipt
from apps.receipts.verifier.verify import Verdict
from apps.tenancy.admin_access import OrgFilter, OrgScopedAdmin
from apps.tenancy.admin_paging import KeysetAdmin, KeysetChangeList, KeysetPage


@dataclass(frozen=True)
class Reverification:
    """A stored receipt checked again: its verdict now, and what of its entry holds."""

    seq: int
    verdict: Verdict
    problems: tuple[str, ...]
    retired: bool = False  # the body is archived: only its digest and links are checked here

    @property
    def ok(self) -> bool:
        return (self.retired or self.verdict.is_valid) and not self.problems

    def __str__(self) -> str:
        if self.retired:
            link = "; ".join(self.problems) if self.problems else "digest and chain link hold"
            return f"#{self.seq}: body archived and retired (checked by its digest); {link}"
        level = f" at {self.verdict.trust_level}" if self.verdict.trust_level else ""
        sentence = VERDICT_SENTENCES.get(self.verdict.kind, "").rstrip(".")
        explained = f"{self.verdict.kind}{level}" + (f" ({sentence})" if sentence else "")
        detail = f": {self.verdict.detail}" if self.verdict.detail else ""
        link = "; ".join(self.problems) if self.problems else "digest and chain link hold"
        return f"#{self.seq}: {explained}{detail}; {link}"


def reverify(entry: MirrorEntry) -> Reverification:
    """verify_receipt on the stored text, then the entry's digest, its chain hash and its
    links to both neighbours recomputed (the single-entry form of mirror_chain_check). A
    retired entry (its body archived) is checked by its stored digest."""
    retired = is_retired(entry)
    verdict = verify_receipt(entry.receipt) if not retired else Verdict(kind="Retired")
    problems = []
    if verdict.receipt is not None and verdict.receipt.action_hash != entry.action_hash:
        problems.append("the stored receipt's action_hash differs from the entry's")
    if verdict.is_valid and not stored_level_holds(verdict, entry.trust_level):
        problems.append(f"stored trust level {entry.trust_level}, derived {verdict.trust_level}")
    digest = receipt_digest(entry.receipt) if not retired else entry.receipt_digest
    if digest != entry.receipt_digest:
        problems.append("receipt_digest does not match the stored text")
    recomputed = chain_hash(
        prev_chain_hash=entry.prev_chain_hash,
        seq=entry.seq,
        action_hash=entry.action_hash,
        receipt_digest_hex=digest,
        supersedes_action_hash=entry.supersedes_action_hash,
    )
    if recomputed != entry.chain_hash:
        problems.append("chain_hash does not recompute")
    neighbours = {
        seq: (prev_hash, own_hash)
        for seq, prev_hash, own_hash in MirrorEntry.objects.filter(
            org_id=entry.org_id, seq__in=[entry.seq - 1, entry.seq + 1]
        ).values_list("seq", "prev_chain_hash", "chain_hash")
    }
    previous = EMPTY_CHAIN_HEAD if entry.seq == 1 else neighbours.get(entry.seq - 1, ("", ""))[1]
    if entry.prev_chain_hash != previous:
        problems.append(f"prev_chain_hash is not entry #{entry.seq - 1}'s chain_hash")
    following = neighbours.get(entry.seq + 1)
    if following is not None and following[0] != entry.chain_hash:
        problems.append(f"entry #{entry.seq + 1} does not link to this chain_hash")
    return Reverification(seq=entry.seq, verdict=verdict, problems=tuple(problems), retired=retired)


def choices_filter(field: str, label: str, values: tuple[str, ...]) -> type[admin.ListFilter]:
    """A filter over a fixed vocabulary of the receipt format: the stock one would scan the
    whole mirror table for its distinct values on every page."""

    class ChoicesFilter(admin.SimpleListFilter):
        title = label
        parameter_name = field

        def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
            return [(value, value) for value in values]

        def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
            value = self.value()
            return queryset.filter(**{field: value}) if value in values else queryset

    return ChoicesFilter


KindFilter = choices_filter("kind", "kind", LIFECYCLE_KINDS)


def _content(entry: MirrorEntry) -> dict[str, Any]:
    try:
        content = json.loads(entry.receipt)["content"]
    except (ValueError, KeyError, TypeError):
        return {}
    return content if isinstance(content, dict) else {}


def copyable_hash(value: str) -> str:
    """A hash shortened to 12 characters, the full one on hover, with a copy button."""
    if not value:
        return "-"
    return format_html(
        '<span class="whitespace-nowrap"><code title="{}">{}…</code> '
        '<button type="button" class="copy-button text-primary-600" data-copy="{}" '
        'title="Copy the full hash" aria-label="Copy the full hash" '
        "onclick=\"navigator.clipboard&&navigator.clipboard.writeText(this.dataset.copy);"
        "this.textContent='copied'\">copy</button></span>",
        value, value[:12], value,
    )  # fmt: skip


# What each verdict name means, in a sentence beside the name (server.md §2's kinds).
VERDICT_SENTENCES = {
    "Valid": "the receipt verifies: its hash, signatures and trust level hold.",
    "Malformed": "the text is not a well-formed receipt of a known version.",
    "HashMismatch": "the content was changed after it was hashed: action_hash does not match.",
    "InvalidSignature": "a signature does not verify over the content.",
    "TrustLevelMismatch": "the claimed trust level is not what the signatures support.",
    "WrongAlgorithm": "the receipt names a signing algorithm this service does not accept.",
    "Unsupported": "the receipt uses a feature this service does not support.",
    "AnchorRequired": "the receipt needs a time anchor it does not carry.",
    "SelfApproval": "the approver's key is the operator's own: an agent cannot approve itself.",
    "ThresholdNotMet": "fewer approvers signed than the quorum requires.",
    "NoTrustedTime": "no trusted timestamp: captured_at is the agent's own claim.",
}


def verdict_words(kind: str) -> str:
    """A verdict's name with its sentence: ``HashMismatch (the content was changed …)``."""
    sentence = VERDICT_SENTENCES.get(kind)
    return f"{kind} ({sentence})" if sentence else kind


DecisionFilter = choices_filter("decision_path", "policy decision", DECISION_PATHS)
VerbFilter = choices_filter("verb", "verb", VERBS)

DETAIL_FIELDS = ("readable", "links", "org", "seq", "action_hash", "kind", "trust_level",
                 "claimed_trust_level",
                 "supersedes_action_hash", "superseded_by", "prev_chain_hash", "chain_hash",
                 "receipt_digest", "received_at", "api_key", "session_id", "session_seq",
                 "verdict_now", "raw_receipt")  # fmt: skip


@dataclass(frozen=True)
class ApprovalLink:
    """The approval a receipt opened (a suspended receipt) or finalized (its L1 form, which
    supersedes the suspended one), as the receipt's page shows it."""

    url: str
    approval_id: str
    status: str
    pending: bool


@dataclass
class ApprovalFacts:
    """What the receipt page knows of approvals. The approvals app sits a floor above and
    supplies them when its admin module loads (:func:`receipt_page_shows_approvals`); until
    then a receipt shows none."""

    link: Callable[[MirrorEntry], ApprovalLink | None] = lambda entry: None
    approver_names: Callable[[int], dict[str, str]] = lambda org_id: {}


APPROVAL_FACTS = ApprovalFacts()


def receipt_page_shows_approvals(
    *,
    link: Callable[[MirrorEntry], ApprovalLink | None],
    approver_names: Callable[[int], dict[str, str]],
) -> None:
    """Called by ``apps.approvals.admin``: ``link`` finds a receipt's approval,
    ``approver_names`` maps an org's approver public keys to "label (key id)"."""
    APPROVAL_FACTS.link = link
    APPROVAL_FACTS.approver_names = approver_names


def _decision_record(value: Any) -> dict[str, Any]:
    """An approver's decision record: embedded as an object, or as its signed JSON text."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    return value if isinstance(value, dict) else {}


def approval_summary(entry: MirrorEntry, content: dict[str, Any]) -> str:
    """The receipt's approval as fields (who decided, when, why) with a link to it; for a
    suspended receipt, the approval it waits on; "none" only when there is none."""
    approval = APPROVAL_FACTS.link(entry)
    names = APPROVAL_FACTS.approver_names(entry.org_id)
    rows: list[tuple[str, str]] = []
    decision = content.get("approver_decision") or {}
    quorum = content.get("multi_approval") or {}
    records = [decision] if decision else [
        _decision_record(record) for record in quorum.get("approvers", [])
    ]  # fmt: skip
    if quorum:
        rows.append(("Quorum", f"{len(records)} of {quorum.get('threshold', '?')} approvers"))
    for record in records:
        who = str(record.get("approver_identity") or record.get("approver_pubkey_b64") or "")
        rows.append(("Decision", str(record.get("decision", ""))))
        rows.append(("Approver", names.get(who, f"unregistered key {who[:12]}…" if who else "-")))
        rows.append(("Decided at", str(record.get("decided_at", "-"))))
        rows.append(("Reason", str(record.get("reason") or "-")))
    if approval is not None:
        link = format_html('<a class="text-primary-600" href="{}">{}</a> ({})', approval.url,
                           approval.approval_id, approval.status)  # fmt: skip
        if not records:
            waiting = "waiting for a human's decision" if approval.pending else ""
            rows.insert(0, ("Status", f"{approval.status}: {waiting}".rstrip(": ")))
        rows.append(("Approval page", link))
    if not rows:
        return "none: the policy let this action through without a human"
    return format_html(
        '<dl class="fields approval-fields">{}</dl>',
        format_html_join("", "<dt>{}</dt><dd>{}</dd>", rows),
    )


class ReceivedFilter(admin.SimpleListFilter):
    """When a receipt was received, in ranges that end now or at a month's start: a range
    of the (org, received_at) index that the page turns into a range of seq (the stock
    date filter and the date hierarchy read the dates of the org's entries)."""

    title = "received"
    parameter_name = "received"
    CHOICES = {
        "today": "Today",
        "7d": "Past 7 days",
        "30d": "Past 30 days",
        "month": "This month",
        "last-month": "Last month",
        "older": "Before this month",
    }

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return list(self.CHOICES.items())

    def bounds(self) -> tuple[datetime | None, datetime | None] | None:
        """[since, until) of the chosen range (UTC), None when none is chosen."""
        now = timezone.now().astimezone(UTC)
        today = now.replace(hour=0, minute=0, second=0, microsecond=0)
        month = today.replace(day=1)
        previous = (month - timedelta(days=1)).replace(day=1)
        return {
            "today": (today, None),
            "7d": (now - timedelta(days=7), None),
            "30d": (now - timedelta(days=30), None),
            "month": (month, None),
            "last-month": (previous, month),
            "older": (None, month),
        }.get(self.value() or "")

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        bounds = self.bounds()
        if bounds is None:
            return queryset
        since, until = bounds
        if since is not None:
            queryset = queryset.filter(received_at__gte=since)
        return queryset.filter(received_at__lt=until) if until is not None else queryset


@admin.register(MirrorEntry)
class MirrorEntryAdmin(KeysetAdmin, OrgScopedAdmin[MirrorEntry]):
    # Readable at 1366 px: what an operator looks for, the hash shortened (full on hover, copy).
    list_display = ["seq", "received_when", "agent_shown", "action_shown", "decision_shown",
                    "trust_shown", "kind", "hash_short"]  # fmt: skip
    list_display_links = ["seq"]
    # One org at a time, paged by seq (apps.tenancy.admin_paging): the org and the date
    # range are read by index; the others look through a window of the org's receipts.
    list_filter = [OrgFilter, ReceivedFilter, "trust_level", KindFilter, DecisionFilter,
                   VerbFilter]  # fmt: skip
    keyset = ("-seq",)
    keyset_params = frozenset({"org", "received"})
    keyset_search_in_window = False  # apps.receipts.search: branches, by index
    # Searched by apps.receipts.search through indexes; the receipt text never is.
    search_fields = ["=action_hash", "=session_id", "tool_name", "workflow", "rule_id",
                     "agent_identity"]  # fmt: skip
    search_help_text = (
        "Finds a full action hash or session id, or a tool, workflow, rule or agent by the "
        "start of its name."
    )
    actions = ["reverify_selected"]
    list_per_page = 50
    change_form_template = "admin/receipts/mirrorentry/change_form.html"
    fields = DETAIL_FIELDS
    readonly_fields = DETAIL_FIELDS

    def get_keyset(self, request: HttpRequest, changelist: KeysetChangeList) -> tuple[str, ...]:
        # A session is shown in its own order (its index's): session position, then seq.
        if self._search(request, changelist).session:
            return ("-session_seq", "-seq")
        return self.keyset

    def _search(self, request: HttpRequest, changelist: KeysetChangeList) -> MirrorSearch:
        cached: MirrorSearch | None = getattr(changelist, "_mirror_search", None)
        if cached is None:
            org_id = self.list_org_id(request)
            cached = MirrorSearch()
            if org_id is not None and changelist.query:
                cached = mirror_search(
                    queryset=changelist.root_queryset, org_id=org_id, term=changelist.query
                )
            changelist._mirror_search = cached  # type: ignore[attr-defined]
        return cached

    def keyset_branches(
        self, request: HttpRequest, queryset: QuerySet[Any], changelist: KeysetChangeList
    ) -> list[QuerySet[Any]]:
        org_id = self.list_org_id(request)
        if org_id is None:
            return []
        received = ReceivedFilter(request, request.GET.dict(), self.model, self).bounds()
        seqs = None
        if received is not None:
            seqs = seq_range_received(org_id=org_id, since=received[0], until=received[1])
            if seqs is None:
                return []
        if changelist.query:
            branches = self._search(request, changelist).branches
        else:
            branches = [queryset.filter(org_id=org_id)]
        if seqs is not None:
            branches = [branch.filter(seq__range=seqs) for branch in branches]
        return branches

    def keyset_window_range(
        self,
        request: HttpRequest,
        changelist: KeysetChangeList,
        cursor: tuple[Any, ...] | None,
        newer_first: bool,
    ) -> Q | None:
        """An org's seq has no gaps: the window is the next ``keyset_window`` seqs."""
        if self.get_keyset(request, changelist) != ("-seq",):
            return None
        window = self.keyset_window
        if cursor is None:
            head = MirrorHead.objects.filter(org_id=self.list_org_id(request) or 0).first()
            top = head.size if head is not None else 0
            return Q(seq__gt=top - window, seq__lte=top)
        (seq,) = cursor
        if newer_first:
            return Q(seq__gte=seq - window, seq__lt=seq)
        return Q(seq__gt=seq, seq__lte=seq + window)

    def keyset_note(
        self, request: HttpRequest, changelist: KeysetChangeList, page: KeysetPage
    ) -> str:
        org_id = self.list_org_id(request) or 0
        head = MirrorHead.objects.filter(org_id=org_id).select_related("org").first()
        total = f" of {head.size:,} in {head.org.slug}" if head is not None else ""
        seqs = [entry.seq for entry in page.shown]
        shown = f"Receipts #{max(seqs)} to #{min(seqs)}" if seqs else "No receipts"
        if page.window is not None:
            shown = f"{len(seqs)} matching among the next {page.window:,} receipts"
        crowded = self._search(request, changelist).crowded
        if crowded:
            names = ", ".join(column.replace("_", " ") for column in crowded)
            shown += f" (more {names} values start with “{changelist.query}”: type more of it)"
        return shown + total

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: MirrorEntry | None = None) -> bool:
        return False

    def get_urls(self) -> list[Any]:
        reverify_view = self.admin_site.admin_view(self.reverify_view)
        return [
            path("<int:entry_id>/reverify/", reverify_view, name="receipts_mirrorentry_reverify"),
            *super().get_urls(),
        ]

    def reverify_view(self, request: HttpRequest, entry_id: int) -> HttpResponse:
        """The "Re-verify" button of a receipt's page (POST): the verdict as a message."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        entry = self.get_queryset(request).filter(pk=entry_id).first()
        if entry is None:
            raise Http404("no such receipt")
        result = reverify(entry)
        self.message_user(request, str(result), messages.SUCCESS if result.ok else messages.ERROR)
        return HttpResponseRedirect(reverse("admin:receipts_mirrorentry_change", args=[entry.pk]))

    def breadcrumb(self, obj: MirrorEntry) -> str:
        action = _content(obj).get("action") or {}
        what = action.get("tool_name") or action.get("target_host") or ""
        return f"Receipt #{obj.seq}: {obj.verb} {what}".strip()

    @admin.display(description="Received", ordering="received_at")
    def received_when(self, obj: MirrorEntry) -> str:
        return format_html(
            '<span class="whitespace-nowrap" title="{}">{}</span>',
            obj.received_at.isoformat(), f"{obj.received_at:%Y-%m-%d %H:%M}",
        )  # fmt: skip

    @admin.display(description="Agent", ordering="agent_identity")
    def agent_shown(self, obj: MirrorEntry) -> str:
        """The agent's identity (its operator key), shortened; the full one on hover."""
        identity = obj.agent_identity
        if len(identity) <= 16:
            return identity or "-"
        return format_html('<code title="{}">{}…</code>', identity, identity[:10])

    @admin.display(description="Action")
    def action_shown(self, obj: MirrorEntry) -> str:
        action = _content(obj).get("action") or {}
        what = action.get("tool_name") or action.get("target_host") or ""
        text = f"{obj.verb} {what}".strip()
        return f"{text} · {obj.workflow}" if obj.workflow else text

    @admin.display(description="Policy decision", ordering="decision_path")
    def decision_shown(self, obj: MirrorEntry) -> str:
        return obj.decision_path or "-"

    @admin.display(description="Trust", ordering="trust_level")
    def trust_shown(self, obj: MirrorEntry) -> str:
        claimed = obj.claimed_trust_level
        if claimed and claimed != obj.trust_level:
            return f"{obj.trust_level} (claimed {claimed})"
        return obj.trust_level

    @admin.display(description="Hash")
    def hash_short(self, obj: MirrorEntry) -> str:
        return copyable_hash(obj.action_hash)

    @admin.display(description="Links")
    def links(self, obj: MirrorEntry) -> str:
        """Session neighbours, chain predecessor (and successor), the approval it opened."""
        entries = MirrorEntry.objects.filter(org_id=obj.org_id)
        rows: list[tuple[str, str, str]] = []

        def entry_row(label: str, entry: MirrorEntry | None) -> None:
            if entry is not None:
                url = reverse("admin:receipts_mirrorentry_change", args=[entry.pk])
                rows.append((label, url, f"#{entry.seq} {entry.verb} {entry.action_hash[:12]}…"))

        entry_row("Chain predecessor", entries.filter(seq=obj.seq - 1).first())
        entry_row("Chain successor", entries.filter(seq=obj.seq + 1).first())
        if obj.session_id and obj.session_seq is not None:
            session = entries.filter(session_id=obj.session_id)
            entry_row(
                "Session previous",
                session.filter(session_seq__lt=obj.session_seq).order_by("-session_seq").first(),
            )
            entry_row(
                "Session next",
                session.filter(session_seq__gt=obj.session_seq).order_by("session_seq").first(),
            )
            url = reverse("admin:receipts_mirrorentry_changelist")
            query = urlencode({"org": obj.org_id, "q": obj.session_id})
            rows.append(("Whole session", f"{url}?{query}", obj.session_id))
        approval = APPROVAL_FACTS.link(obj)
        if approval is not None:
            rows.append(("Approval", approval.url, f"{approval.approval_id} ({approval.status})"))
        if not rows:
            return "none: the first receipt of its chain, outside any session"
        return format_html(
            '<ul class="receipt-links">{}</ul>',
            format_html_join("", '<li>{}: <a class="text-primary-600" href="{}">{}</a></li>', rows),
        )

    @admin.display(description="Receipt")
    def readable(self, obj: MirrorEntry) -> str:
        if is_retired(obj):
            return (
                "The body of this receipt is archived: it was past the org's retention, so it "
                "was written to the org's archive of its month, verified there, and retired "
                "from the mirror. Its hashes and chain position below still verify."
            )
        try:
            envelope: dict[str, Any] = json.loads(obj.receipt)
            content: dict[str, Any] = envelope["content"]
        except (ValueError, KeyError, TypeError):
            return "(the stored text does not decode: see the verdict below)"
        action = content.get("action") or {}
        policy = content.get("policy") or {}
        rows: list[tuple[str, Any]] = [
            (
                "Action",
                f"{action.get('verb', '')} {action.get('tool_name', '')} "
                f"{action.get('target_host', '')}".strip(),
            ),
            ("Workflow / account", f"{action.get('workflow', '')} / {action.get('account', '')}"),
            ("Fields", json.dumps(action.get("fields", {}), ensure_ascii=False, indent=1)),
            (
                "Policy outcome",
                f"{policy.get('decision_path', '')} by rule {policy.get('rule_id', '')}\n"
                f"{policy.get('rule_display', '')}".strip(),
            ),
            ("Trust level", content.get("trust_level", "")),
            ("Operator", content.get("agent_identity", "")),
            ("Captured at", content.get("captured_at", "")),
            ("Approval", approval_summary(obj, content)),
            (
                "Signatures",
                ", ".join(
                    f"{sig.get('key_id')} {sig.get('public_key', '')[:12]}…"
                    for sig in envelope.get("signatures", [])
                ),
            ),
            (
                "Chain position",
                f"seq {obj.seq}; supersedes {obj.supersedes_action_hash or 'nothing'}; "
                f"superseded by {obj.superseded_by or 'nothing'}",
            ),
        ]
        cells = [
            (label, value if label == "Approval" else format_html("<pre>{}</pre>", value))
            for label, value in rows
        ]
        return format_html(
            '<table class="readable">{}</table>',
            format_html_join("", "<tr><th>{}</th><td>{}</td></tr>", cells),
        )

    @admin.display(description="Stored receipt")
    def raw_receipt(self, obj: MirrorEntry) -> str:
        """The stored text, folded away: indented JSON when it decodes, else as stored."""
        if is_retired(obj):
            return "archived (see the receipt above)"
        try:
            text = json.dumps(json.loads(obj.receipt), ensure_ascii=False, indent=2)
        except ValueError:
            text = obj.receipt
        return format_html(
            '<details class="raw-json"><summary>Raw JSON ({} characters, as pushed)</summary>'
            "<pre>{}</pre></details>",
            len(obj.receipt), text,
        )  # fmt: skip

    @admin.display(description="Verdict now (re-verified on this page)")
    def verdict_now(self, obj: MirrorEntry) -> str:
        return str(reverify(obj))

    @admin.action(description="Re-verify selected receipts")
    def reverify_selected(self, request: HttpRequest, queryset: QuerySet[MirrorEntry]) -> None:
        for entry in queryset.order_by("seq")[:200]:
            result = reverify(entry)
            self.message_user(
                request, str(result), messages.SUCCESS if result.ok else messages.ERROR
            )
