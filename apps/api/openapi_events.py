"""OpenAPI components of outbound events (apps.events): each event type's payload and the
Standard Webhooks envelope they travel in. They are sent, not served, so no view answers
with them: their serializers here describe them, and ``event_components`` resolves them as
drf-spectacular resolves a view's (the routes that manage endpoints and deliveries have
their own serializers, ``apps.api.keyscoped.events``). Every profile's document carries
``WebhookEvent`` and what it references (``apps.api.openapi.finish_profile_document``)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.plumbing import ComponentRegistry
from drf_spectacular.utils import PolymorphicProxySerializer
from rest_framework import serializers
from rest_framework.generics import GenericAPIView

Schema = dict[str, Any]
Serializer = serializers.Serializer[Any]

HEX64 = "^[0-9a-f]{64}$"


def _hash(description: str = "64 lowercase hex", **kwargs: Any) -> serializers.RegexField:
    return serializers.RegexField(HEX64, help_text=description, **kwargs)


def _text(**kwargs: Any) -> serializers.CharField:
    """A string that may be null."""
    return serializers.CharField(allow_null=True, **kwargs)


class ApprovalContentSummarySerializer(Serializer):
    """What the suspended action is: who, which workflow and verb, which rule (the names of
    its fields, never their values). Null until the content is known."""

    class ActionSerializer(Serializer):
        workflow = _text()
        verb = _text()
        account = _text()
        field_names = serializers.ListField(child=serializers.CharField())

        class Meta:
            ref_name = "ApprovalContentSummaryAction"

    class PolicySerializer(Serializer):
        rule_id = _text()
        rule_display = _text()
        decision_path = _text()

        class Meta:
            ref_name = "ApprovalContentSummaryPolicy"

    agent_identity = _text()
    kind = _text()
    trust_level = _text()
    action = ActionSerializer()
    policy = PolicySerializer()

    class Meta:
        ref_name = "ApprovalContentSummary"


class _ApprovalEventSerializer(Serializer):
    approval_id = serializers.CharField(help_text="`apr_...`")
    action_hash = _hash()
    ticket_hash = _hash("The suspend ticket, once known.", allow_null=True)
    status = serializers.ChoiceField(
        ["pending", "approved", "rejected", "expired", "decided_locally"]
    )
    threshold = serializers.IntegerField(min_value=1)
    approved_count = serializers.IntegerField(min_value=0)
    rule_id = _text()
    expires_at = serializers.DateTimeField(allow_null=True)
    on_timeout = _text()
    signing_url = serializers.URLField(
        help_text="The console page where an approver reviews and signs this approval."
    )
    summary = ApprovalContentSummarySerializer(allow_null=True)


class ApprovalOpenedEventSerializer(_ApprovalEventSerializer):
    """An approval was opened (possibly provisionally, by a suspended push)."""

    class Meta:
        ref_name = "ApprovalOpenedEvent"


class ApprovalWaitingEventSerializer(_ApprovalEventSerializer):
    """The approval is open and confirmed: approvers can sign it now."""

    class Meta:
        ref_name = "ApprovalWaitingEvent"


class ApprovalVoteRecordedEventSerializer(_ApprovalEventSerializer):
    """One approver's signed vote was counted."""

    decision = serializers.ChoiceField(["approved", "rejected"])
    approver_public_key = serializers.CharField()

    class Meta:
        ref_name = "ApprovalVoteRecordedEvent"


class ApprovalDecidedEventSerializer(_ApprovalEventSerializer):
    """The approval is settled: by votes, by its expiry (`on_timeout` deny: rejected), or
    closed by the agent's own unsigned decision link (`decided_locally`: no human decision
    recorded)."""

    outcome = serializers.ChoiceField(["approved", "rejected", "expired", "decided_locally"])
    reason = serializers.ChoiceField(["votes", "expired", "decision_link"])

    class Meta:
        ref_name = "ApprovalDecidedEvent"


class ReceiptRefusedEventSerializer(Serializer):
    """A pushed receipt was refused. Nothing of the receipt beyond its action hash."""

    kind = serializers.CharField(help_text="The verdict kind (or `Malformed`).")
    action_hash = _hash("As the receipt names it.", allow_null=True)
    refused_at = serializers.DateTimeField()

    class Meta:
        ref_name = "ReceiptRefusedEvent"


class PolicyDeployedEventSerializer(Serializer):
    """A policy became the org's active policy."""

    policy_id = serializers.CharField()
    policy_hash = _hash()
    previous_policy_hash = _hash()
    rule_count = serializers.IntegerField()
    channel = serializers.CharField()
    deployed_by = _text()
    deployed_at = serializers.DateTimeField()

    class Meta:
        ref_name = "PolicyDeployedEvent"


class QuotaThresholdEventSerializer(Serializer):
    """The month's mirrored receipts reached 80% or 100% of the monthly cap (once each)."""

    month = serializers.CharField(help_text="`YYYY-MM`, e.g. `2026-11`")
    threshold_percent = serializers.ChoiceField([80, 100])
    count = serializers.IntegerField()
    cap = serializers.IntegerField()

    class Meta:
        ref_name = "QuotaThresholdEvent"


class ApiKeyEventSerializer(Serializer):
    """An SDK API key was created or revoked (never the key itself)."""

    prefix = serializers.CharField()
    # A declared field leaves the class attributes (DRF's metaclass); mypy sees Field.label.
    label = serializers.CharField()  # type: ignore[assignment]
    scopes = serializers.ListField(child=serializers.CharField())
    created_at = serializers.DateTimeField()
    revoked_at = serializers.DateTimeField(allow_null=True)

    class Meta:
        ref_name = "ApiKeyEvent"


class TransparencyAlertEventSerializer(Serializer):
    """The transparency log's monitor found it inconsistent; for the org an alert names, or
    for every org when it concerns the whole log."""

    alert = serializers.CharField(help_text="What monitor_log found (a fork, a rollback, ...).")
    log = serializers.CharField(help_text="The log's base URL the monitor followed.")
    observed_at = serializers.DateTimeField()

    class Meta:
        ref_name = "TransparencyAlertEvent"


class ReceiptsArchiveEventSerializer(Serializer):
    """A closed month of the org's receipts, past its retention, was archived (written to
    the archive storage) or its bodies retired from the mirror after the archive verified."""

    month = serializers.CharField(help_text="YYYY-MM (UTC).")
    first_seq = serializers.IntegerField()
    last_seq = serializers.IntegerField()
    receipts = serializers.IntegerField()
    archive = serializers.CharField(help_text="The archive's name in the archive storage.")
    location = serializers.CharField(help_text="Where it is: a path, or the bucket's URL.")
    bytes = serializers.IntegerField()
    sha256 = serializers.CharField()
    written_at = serializers.DateTimeField()
    retired_at = serializers.DateTimeField(allow_null=True)

    class Meta:
        ref_name = "ReceiptsArchiveEvent"

class LegalHoldEventSerializer(Serializer):
    """A legal hold was set on the org, or released (by an owner, or an operator)."""

    hold_id = serializers.CharField(help_text="`hold_…`")
    scope = serializers.ChoiceField(["org", "range", "session"])
    session_id = _text(help_text="The held session (scope `session`).")
    reason = serializers.CharField()
    set_by = serializers.CharField(help_text="Who set it: a username, or an operator's name.")
    set_at = serializers.DateTimeField()
    released_at = serializers.DateTimeField(allow_null=True)
    released_by = _text()
    release_reason = _text()

    class Meta:
        ref_name = "LegalHoldEvent"

    def get_fields(self) -> dict[str, serializers.Field]:  # type: ignore[type-arg]
        # ``from`` is a Python keyword: the range's days are declared here, in wire order.
        fields = super().get_fields()
        window = {
            name: serializers.DateField(
                allow_null=True, help_text=f"The range's {which} day (UTC, inclusive; null: open)."
            )
            for name, which in (("from", "first"), ("to", "last"))
        }
        order = ("hold_id", "scope")
        return {
            **{name: fields[name] for name in order},
            **window,
            **{name: field for name, field in fields.items() if name not in order},
        }


# Each event type: its envelope's component name and its payload.
ENVELOPES: dict[str, tuple[str, type[Serializer]]] = {
    "approval.opened": ("ApprovalOpenedWebhook", ApprovalOpenedEventSerializer),
    "approval.waiting_for_approvers": ("ApprovalWaitingWebhook", ApprovalWaitingEventSerializer),
    "approval.vote_recorded": ("ApprovalVoteRecordedWebhook", ApprovalVoteRecordedEventSerializer),
    "approval.decided": ("ApprovalDecidedWebhook", ApprovalDecidedEventSerializer),
    "receipt.refused": ("ReceiptRefusedWebhook", ReceiptRefusedEventSerializer),
    "policy.deployed": ("PolicyDeployedWebhook", PolicyDeployedEventSerializer),
    "quota.threshold": ("QuotaThresholdWebhook", QuotaThresholdEventSerializer),
    "api_key.created": ("ApiKeyCreatedWebhook", ApiKeyEventSerializer),
    "api_key.revoked": ("ApiKeyRevokedWebhook", ApiKeyEventSerializer),
    "transparency.alert": ("TransparencyAlertWebhook", TransparencyAlertEventSerializer),
    "receipts.archived": ("ReceiptsArchivedWebhook", ReceiptsArchiveEventSerializer),
    "receipts.retired": ("ReceiptsRetiredWebhook", ReceiptsArchiveEventSerializer),
    "legal_hold.set": ("LegalHoldSetWebhook", LegalHoldEventSerializer),
    "legal_hold.released": ("LegalHoldReleasedWebhook", LegalHoldEventSerializer),
}


def _envelope_serializer(event_type: str, name: str, data: type[Serializer]) -> type[Serializer]:
    """The Standard Webhooks envelope of ``event_type``: its serializer class."""
    doc = (
        f"The body of a `{event_type}` webhook (Standard Webhooks envelope). Its `webhook-id` "
        "header is the event's id, the same on every attempt."
    )
    members = {
        "type": serializers.ChoiceField([event_type]),
        "timestamp": serializers.DateTimeField(help_text="When the event happened."),
        "data": data(),
        "Meta": type("Meta", (), {"ref_name": name}),
        "__doc__": doc,
    }
    return type(f"{name}Serializer", (serializers.Serializer,), members)


WEBHOOK_EVENT = PolymorphicProxySerializer(
    component_name="WebhookEvent",
    serializers={kind: _envelope_serializer(kind, *entry) for kind, entry in ENVELOPES.items()},
    resource_type_field_name="type",
)
# The components a route's schema may reference by name (``apps.api.openapi.ref``).
EVENT_COMPONENT_NAMES = frozenset(
    [WEBHOOK_EVENT.component_name]
    + [name for name, _ in ENVELOPES.values()]
    + [payload.Meta.ref_name for _, payload in ENVELOPES.values()]  # type: ignore[attr-defined]
)
WEBHOOK_EVENT_DESCRIPTION = (
    "Any webhook body (`format` `standard`), signed per Standard Webhooks: `webhook-id`, "
    "`webhook-timestamp`, `webhook-signature` (`v1,<base64 HMAC-SHA256>` of "
    "`{id}.{timestamp}.{body}`; during a secret rotation two, space-separated). A `slack` "
    'endpoint receives `{"text": ...}` instead.'
)


def event_components() -> dict[str, Schema]:
    """``WebhookEvent`` and every component it references, resolved from the serializers."""
    inspector = AutoSchema()
    inspector.registry = ComponentRegistry()
    view: GenericAPIView[Any] = GenericAPIView(request=None, format_kwarg=None)
    inspector.method, inspector.path, inspector.view = "GET", "/", view
    inspector.resolve_serializer(WEBHOOK_EVENT, "response")
    components: dict[str, Schema] = inspector.registry.build({})["schemas"]
    components["WebhookEvent"]["description"] = WEBHOOK_EVENT_DESCRIPTION
    # A nullable summary is written as the documents always wrote it, `$ref` beside
    # `nullable` (one level shallower than drf-spectacular's `allOf` for clients that walk it).
    for name, _ in ENVELOPES.values():
        payload = components[components[name]["properties"]["data"]["$ref"].rsplit("/", 1)[1]]
        summary_member = payload["properties"].get("summary")
        if summary_member is not None and "allOf" in summary_member:
            payload["properties"]["summary"] = {**summary_member["allOf"][0], "nullable": True}
    # The summary's parts are members, not components of their own: written inline.
    summary = components["ApprovalContentSummary"]["properties"]
    for member in ("action", "policy"):
        name = summary[member]["$ref"].rsplit("/", 1)[1]
        summary[member] = components.pop(name)
    return components


def __getattr__(name: str) -> Any:
    # ``EVENT_COMPONENTS`` is resolved on first use: the serializers need the app registry.
    if name == "EVENT_COMPONENTS":
        return event_components()
    raise AttributeError(name)
