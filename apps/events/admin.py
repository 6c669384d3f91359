"""The console's pages for outbound events: webhook endpoints (manager+ changes; the
secret shown once, rotation), each endpoint's delivery log with a redeliver action, a
member's own email opt-ins. (Background evidence exports are the audit app's.)"""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html
from unfold.widgets import (
    UnfoldAdminCheckboxSelectMultipleWidget,
    UnfoldAdminSelectWidget,
    UnfoldAdminURLInputWidget,
)

from apps.events.delivery import rotating
from apps.events.destinations import ENDPOINT_MANAGER, masked_url, url_shown
from apps.events.models import (
    EMAIL_EVENT_TYPES,
    Delivery,
    EmailSubscription,
    EndpointFormat,
    Event,
    EventType,
    WebhookEndpoint,
)
from apps.events.services import (
    delivery_redeliver,
    webhook_endpoint_create,
    webhook_endpoint_delete,
    webhook_endpoint_rotate_secret,
    webhook_endpoint_update,
)
from apps.events.subscriptions import forget_subscribers
from apps.tenancy.admin_access import (
    OrgFilter,
    OrgScopedAdmin,
    can_write,
    member_roles,
    role_in,
)
from apps.tenancy.admin_paging import KeysetAdmin, KeysetChangeList
from apps.tenancy.audit_trail import Actor
from apps.tenancy.models import Role


class WebhookEndpointForm(forms.ModelForm[WebhookEndpoint]):
    url = forms.URLField(max_length=2000, assume_scheme="https", widget=UnfoldAdminURLInputWidget)
    event_types = forms.MultipleChoiceField(
        choices=EventType.choices, widget=UnfoldAdminCheckboxSelectMultipleWidget
    )
    format = forms.ChoiceField(
        choices=EndpointFormat.choices, initial=EndpointFormat.STANDARD,
        widget=UnfoldAdminSelectWidget,
    )  # fmt: skip

    class Meta:
        model = WebhookEndpoint
        fields: list[str] = ["org", "url", "description", "event_types", "format", "enabled"]


@admin.register(WebhookEndpoint)
class WebhookEndpointAdmin(OrgScopedAdmin[WebhookEndpoint]):
    form = WebhookEndpointForm
    list_display = ["endpoint_id", "org", "url", "format", "enabled", "consecutive_failures",
                    "delivery_log", "created_at"]  # fmt: skip
    list_filter = [OrgFilter, "enabled", "format"]
    search_fields = ["endpoint_id", "url", "description"]
    actions = ["rotate_secret", "enable_selected", "disable_selected"]

    # An endpoint's URL is often its credential: whole only to those who may manage it
    # (``url_shown``), masked in every other reader's list, detail page and search.
    def get_list_display(self, request: HttpRequest) -> list[Any]:
        @admin.display(description="URL")
        def url(obj: WebhookEndpoint) -> str:
            return url_shown(obj.url, role=role_in(request, obj.org_id))

        return [url if name == "url" else name for name in self.list_display]

    def get_search_fields(self, request: HttpRequest) -> list[str]:
        # Searching URLs would let a reader find a secret by its letters: only for those who
        # may manage every endpoint they see.
        manages_all = request.user.is_superuser or all(
            role.at_least(ENDPOINT_MANAGER) for role in member_roles(request).values()
        )
        return [name for name in self.search_fields if manages_all or name != "url"]

    def get_fields(
        self, request: HttpRequest, obj: WebhookEndpoint | None = None
    ) -> tuple[str, ...]:
        if obj is None:
            return ("org", "url", "description", "event_types", "format", "enabled")
        url = "url" if can_write(request, obj.org_id, ENDPOINT_MANAGER) else "masked_url"
        return ("org", "endpoint_id", url, "description", "event_types", "format", "enabled",
                "disabled_reason", "consecutive_failures", "rotation", "delivery_log",
                "created_at")  # fmt: skip

    @admin.display(description="URL")
    def masked_url(self, obj: WebhookEndpoint) -> str:
        return masked_url(obj.url)

    def get_readonly_fields(
        self, request: HttpRequest, obj: WebhookEndpoint | None = None
    ) -> tuple[str, ...]:
        if obj is None:
            return ()
        return ("org", "endpoint_id", "masked_url", "disabled_reason", "consecutive_failures",
                "rotation", "delivery_log", "created_at")  # fmt: skip

    def has_delete_permission(
        self, request: HttpRequest, obj: WebhookEndpoint | None = None
    ) -> bool:
        return can_write(request, self._org_id(obj), self.write_role)

    def breadcrumb(self, obj: WebhookEndpoint) -> str:
        return f"Endpoint “{obj.description}”" if obj.description else f"Endpoint {obj.endpoint_id}"

    @admin.display(description="Delivery log")
    def delivery_log(self, obj: WebhookEndpoint) -> str:
        # The list shows one org at a time: the endpoint's.
        query = f"?org={obj.org_id}&endpoint__id__exact={obj.pk}"
        url = reverse("admin:events_delivery_changelist") + query
        return format_html('<a href="{}">deliveries</a>', url)

    @admin.display(description="Secret rotation")
    def rotation(self, obj: WebhookEndpoint) -> str:
        if rotating(obj):
            until = obj.previous_secret_expires_at
            return f"the previous secret signs too until {until:%Y-%m-%d %H:%M} UTC"
        return "one secret signs"

    def save_model(
        self, request: HttpRequest, obj: WebhookEndpoint, form: Any, change: bool
    ) -> None:
        data = form.cleaned_data
        if change:
            webhook_endpoint_update(
                endpoint=obj, url=data["url"], event_types=data["event_types"],
                format=data["format"], description=data["description"], enabled=data["enabled"],
            )  # fmt: skip
            return
        created = webhook_endpoint_create(
            org=data["org"], url=data["url"], event_types=data["event_types"],
            format=data["format"], description=data["description"], enabled=data["enabled"],
        )  # fmt: skip
        obj.pk = created.pk
        obj.endpoint_id = created.endpoint_id
        request._created_endpoint = created  # type: ignore[attr-defined]

    def delete_model(self, request: HttpRequest, obj: WebhookEndpoint) -> None:
        webhook_endpoint_delete(endpoint=obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[WebhookEndpoint]) -> None:
        for endpoint in queryset:
            if can_write(request, endpoint.org_id):
                webhook_endpoint_delete(endpoint=endpoint)

    def response_add(
        self, request: HttpRequest, obj: WebhookEndpoint, post_url_continue: str | None = None
    ) -> HttpResponse:
        created = getattr(request, "_created_endpoint", None)
        if created is not None:
            return self._secret_page(request, created, rotated=False)
        return super().response_add(request, obj, post_url_continue)

    def _secret_page(
        self, request: HttpRequest, endpoint: WebhookEndpoint, *, rotated: bool
    ) -> HttpResponse:
        """The secret, in this response only (never in a message, a cookie or a log)."""
        context = {
            **self.admin_site.each_context(request),
            "title": "Webhook secret rotated" if rotated else "Webhook endpoint added",
            "opts": self.model._meta,
            "endpoint": endpoint,
            "rotated": rotated,
        }
        response = TemplateResponse(
            request, "admin/events/webhookendpoint/secret_once.html", context
        )
        response["Cache-Control"] = "no-store"
        return response

    @admin.action(description="Rotate the signing secret (the old one signs too for a while)")
    def rotate_secret(
        self, request: HttpRequest, queryset: QuerySet[WebhookEndpoint]
    ) -> HttpResponse | None:
        if queryset.count() != 1:
            self.message_user(request, "Rotate one endpoint at a time.", messages.ERROR)
            return None
        endpoint = queryset.get()
        if not can_write(request, endpoint.org_id):
            raise PermissionDenied
        rotated = webhook_endpoint_rotate_secret(
            endpoint=endpoint, actor=Actor.console(request.user)
        )
        return self._secret_page(request, rotated, rotated=True)

    def _set_enabled(
        self, request: HttpRequest, queryset: QuerySet[WebhookEndpoint], on: bool
    ) -> None:
        done = 0
        for endpoint in queryset:
            if not can_write(request, endpoint.org_id):
                messages.error(request, f"{endpoint.endpoint_id}: needs the manager role")
                continue
            webhook_endpoint_update(
                endpoint=endpoint, enabled=on, actor=Actor.console(request.user)
            )
            done += 1
        self.message_user(request, f"{'Enabled' if on else 'Disabled'} {done} endpoint(s).")

    @admin.action(description="Enable selected endpoints")
    def enable_selected(self, request: HttpRequest, queryset: QuerySet[WebhookEndpoint]) -> None:
        self._set_enabled(request, queryset, True)

    @admin.action(description="Disable selected endpoints")
    def disable_selected(self, request: HttpRequest, queryset: QuerySet[WebhookEndpoint]) -> None:
        self._set_enabled(request, queryset, False)


FINISHED = ("succeeded", "failed")


@admin.register(Delivery)
class DeliveryAdmin(KeysetAdmin, OrgScopedAdmin[Delivery]):
    """The delivery log: one org at a time, newest first, paged by (created_at, id) without
    a count. Each of the org's endpoints is a branch read through the (endpoint,
    created_at) index (one when the endpoint is chosen): the list costs a page per
    endpoint, and the delivery write path no index beyond the ones it had. The status and
    event type filters look through a window (apps.tenancy.admin_paging)."""

    # Readable at 1366 px: the outcome in one column, when in another (delivered, or the
    # next attempt while one is due); the webhook-id is on the delivery's page.
    list_display = ["event_type", "endpoint_shown", "outcome", "attempts", "when",
                    "created_at"]  # fmt: skip
    list_filter = [OrgFilter, "status", "event__type"]
    # Read by index in keyset_branches, never by the stock search.
    search_fields = ["=event__event_id", "=endpoint__endpoint_id"]
    search_help_text = "Finds a full webhook-id (the event's id) or endpoint id."
    keyset = ("-created_at", "-id")
    keyset_params = frozenset({"org", "endpoint"})
    keyset_search_in_window = False
    # Up to one window an endpoint: a windowed page reads a few thousand deliveries at most.
    keyset_window = 500
    list_per_page = 50
    list_select_related = ["event", "endpoint"]
    actions = ["redeliver"]
    readonly_fields = ["org", "endpoint", "event_id", "event_type", "status", "attempts",
              "last_status_code", "last_latency_ms", "last_error", "next_attempt_at",
              "last_attempt_at", "delivered_at", "created_at", "payload"]  # fmt: skip

    def keyset_branches(
        self, request: HttpRequest, queryset: QuerySet[Any], changelist: KeysetChangeList
    ) -> list[QuerySet[Any]]:
        org_id = self.list_org_id(request)
        if org_id is None:
            return []
        rows = queryset.filter(org_id=org_id)
        endpoints = WebhookEndpoint.objects.filter(org_id=org_id)
        chosen = request.GET.get("endpoint__id__exact", "")
        if chosen:
            endpoints = endpoints.filter(pk=int(chosen) if chosen.isdigit() else 0)
        term = changelist.query.strip()
        if term:
            event = Event.objects.filter(org_id=org_id, event_id=term).values_list("pk")[:1]
            events = list(event)
            if events:  # the event's deliveries, on the delivery's event index
                return [rows.filter(event_id=events[0][0], endpoint__in=endpoints)]
            endpoints = endpoints.filter(endpoint_id=term)
        return [rows.filter(endpoint_id=pk) for pk in endpoints.values_list("pk", flat=True)]

    def get_fields(self, request: HttpRequest, obj: Delivery | None = None) -> tuple[str, ...]:
        # A delivered webhook has no next attempt; one not delivered has no delivery time.
        hidden = {"next_attempt_at"} if obj is not None and obj.status in FINISHED else set()
        if obj is not None and obj.delivered_at is None:
            hidden.add("delivered_at")
        return tuple(str(name) for name in self.readonly_fields if name not in hidden)

    def breadcrumb(self, obj: Delivery) -> str:
        return f"{obj.event.type} delivery ({obj.status})"

    @admin.display(description="Endpoint", ordering="endpoint__endpoint_id")
    def endpoint_shown(self, obj: Delivery) -> str:
        endpoint = obj.endpoint
        return (
            f"{endpoint.description} ({endpoint.endpoint_id})"
            if endpoint.description
            else (endpoint.endpoint_id)
        )

    @admin.display(description="Outcome", ordering="status")
    def outcome(self, obj: Delivery) -> str:
        parts = [obj.get_status_display()]
        if obj.last_status_code:
            parts.append(f"HTTP {obj.last_status_code}")
        if obj.last_latency_ms is not None:
            parts.append(f"{obj.last_latency_ms} ms")
        return " · ".join(parts)

    @admin.display(description="When")
    def when(self, obj: Delivery) -> str:
        if obj.delivered_at is not None:
            return f"delivered {obj.delivered_at:%Y-%m-%d %H:%M}"
        if obj.status in FINISHED:
            return "gave up" + (f": {obj.last_error}" if obj.last_error else "")
        return f"next attempt {obj.next_attempt_at:%Y-%m-%d %H:%M}"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Delivery | None = None) -> bool:
        # The change list needs it for the action; no field is editable.
        return obj is None and super().has_change_permission(request, obj)

    @admin.display(description="Event")
    def event_type(self, obj: Delivery) -> str:
        return obj.event.type

    @admin.display(description="webhook-id")
    def event_id(self, obj: Delivery) -> str:
        return obj.event.event_id

    @admin.display(description="Payload")
    def payload(self, obj: Delivery) -> str:
        return format_html("<pre>{}</pre>", json.dumps(obj.event.payload, indent=1))

    @admin.action(description="Redeliver selected (same webhook-id, now)")
    def redeliver(self, request: HttpRequest, queryset: QuerySet[Delivery]) -> None:
        done = 0
        for delivery in queryset:
            if not can_write(request, delivery.org_id):
                messages.error(request, f"delivery {delivery.pk}: needs the manager role")
                continue
            delivery_redeliver(delivery=delivery)
            done += 1
        self.message_user(request, f"Queued {done} delivery(ies) again.", messages.SUCCESS)


class EmailSubscriptionForm(forms.ModelForm[EmailSubscription]):
    event_type = forms.ChoiceField(
        choices=[(str(t), str(t)) for t in EMAIL_EVENT_TYPES], widget=UnfoldAdminSelectWidget
    )

    class Meta:
        model = EmailSubscription
        fields = ["org", "event_type"]


@admin.register(EmailSubscription)
class EmailSubscriptionAdmin(OrgScopedAdmin[EmailSubscription]):
    """Each member sees and changes only their own opt-ins (any role)."""

    form = EmailSubscriptionForm
    write_role = Role.VIEWER
    list_display = ["event_type", "org", "created_at"]
    list_filter = [OrgFilter]

    def get_queryset(self, request: HttpRequest) -> QuerySet[EmailSubscription]:
        return super().get_queryset(request).filter(user_id=request.user.pk or 0)

    def has_change_permission(
        self, request: HttpRequest, obj: EmailSubscription | None = None
    ) -> bool:
        return obj is None and super().has_change_permission(request, obj)

    def has_delete_permission(
        self, request: HttpRequest, obj: EmailSubscription | None = None
    ) -> bool:
        return obj is None or obj.user_id == request.user.pk

    def save_model(
        self, request: HttpRequest, obj: EmailSubscription, form: Any, change: bool
    ) -> None:
        obj.user_id = int(request.user.pk or 0)
        super().save_model(request, obj, form, change)
        forget_subscribers(obj.org_id)
