"""The console's tenancy pages. Every write goes through apps.tenancy.services."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import (
    HttpRequest,
    HttpResponse,
    HttpResponseRedirect,
)
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone
from unfold.widgets import UnfoldAdminCheckboxSelectMultipleWidget, UnfoldAdminTextInputWidget

from apps.common.encryption import sealed
from apps.common.errors import DomainError
from apps.tenancy.admin_access import OrgFilter, OrgScopedAdmin, can_write
from apps.tenancy.admin_paging import KeysetAdmin
from apps.tenancy.audit_trail import ACTOR_VIAS, Actor
from apps.tenancy.models import (
    DEFAULT_SCOPES,
    ApiKey,
    Invitation,
    Membership,
    OrgAuditEvent,
    Role,
    ScimToken,
    Scope,
    SsoConfig,
)
from apps.tenancy.services import (
    IssuedKey,
    api_key_issue,
    api_key_revoke,
    api_key_rotate,
    invitation_create,
    invitation_resend,
    invitation_revoke,
    membership_add,
    membership_remove,
)
from apps.tenancy.services.scim import scim_token_issue, scim_token_revoke
from apps.tenancy.services.sso import sso_configure


class ApiKeyIssueForm(forms.ModelForm[ApiKey]):
    scopes = forms.MultipleChoiceField(
        choices=Scope.choices,
        widget=UnfoldAdminCheckboxSelectMultipleWidget,
        initial=[scope.value for scope in DEFAULT_SCOPES],
    )

    class Meta:
        model = ApiKey
        fields = ["org", "label", "scopes"]


@admin.register(ApiKey)
class ApiKeyAdmin(OrgScopedAdmin[ApiKey]):
    list_display = ["prefix", "org", "label", "scopes_shown", "created_at", "last_used_at",
                    "revoked_at"]  # fmt: skip
    list_filter = [OrgFilter, "revoked_at"]
    search_fields = ["prefix", "label", "org__slug"]
    readonly_fields = ["prefix", "created_at", "last_used_at", "revoked_at"]
    actions = ["revoke_selected", "rotate_selected"]

    def get_form(
        self, request: HttpRequest, obj: ApiKey | None = None, change: bool = False, **kwargs: Any
    ) -> type[forms.ModelForm[ApiKey]]:
        if obj is None:
            kwargs["form"] = ApiKeyIssueForm
        return super().get_form(request, obj, change, **kwargs)

    def get_fields(self, request: HttpRequest, obj: ApiKey | None = None) -> tuple[str, ...]:
        if obj is None:
            return ("org", "label", "scopes")
        return ("org", "label", "prefix", "scopes_shown", "created_at", "last_used_at",
                "revoked_at")  # fmt: skip

    def get_readonly_fields(
        self, request: HttpRequest, obj: ApiKey | None = None
    ) -> tuple[str, ...]:
        return () if obj is None else self.get_fields(request, obj)

    @admin.display(description="Scopes")
    def scopes_shown(self, obj: ApiKey) -> str:
        return ", ".join(obj.scopes or []) or "none"

    def has_change_permission(self, request: HttpRequest, obj: ApiKey | None = None) -> bool:
        # A key is issued, revoked or rotated (the actions), never edited.
        return False if obj is not None else super().has_change_permission(request, obj)

    def save_model(self, request: HttpRequest, obj: ApiKey, form: Any, change: bool) -> None:
        issued = api_key_issue(
            org=obj.org,
            scopes=form.cleaned_data["scopes"],
            label=obj.label,
            actor=Actor.console(request.user),
        )
        obj.pk = issued.api_key.pk
        obj.prefix = issued.api_key.prefix
        request._issued_keys = [(None, issued)]  # type: ignore[attr-defined]

    def response_add(
        self, request: HttpRequest, obj: ApiKey, post_url_continue: str | None = None
    ) -> HttpResponse:
        issued = getattr(request, "_issued_keys", None)
        if issued:
            return self._secrets_page(request, "API key issued", issued)
        return super().response_add(request, obj, post_url_continue)

    def _secrets_page(
        self, request: HttpRequest, title: str, issued: list[tuple[str | None, IssuedKey]]
    ) -> HttpResponse:
        """The new secrets, in this response only: never in a message (a cookie or the
        session would carry them on), never stored (only their digests are)."""
        context = {
            **self.admin_site.each_context(request),
            "title": title,
            "opts": self.model._meta,
            # The SDK's endpoint: this service, at the address the console is reached by.
            "endpoint": request.build_absolute_uri("/").rstrip("/"),
            "issued": [
                {"replaces": old, "prefix": new.api_key.prefix, "org": new.api_key.org,
                 "scopes": new.api_key.scopes, "label": new.api_key.label,
                 "secret": new.secret}
                for old, new in issued
            ],
        }  # fmt: skip
        response = TemplateResponse(request, "admin/tenancy/apikey/secret_once.html", context)
        response["Cache-Control"] = "no-store"
        return response

    @admin.action(description="Revoke selected API keys")
    def revoke_selected(self, request: HttpRequest, queryset: QuerySet[ApiKey]) -> None:
        done = 0
        for key in queryset:
            if not can_write(request, key.org_id):
                messages.error(request, f"{key.prefix}: needs the manager role in {key.org}")
                continue
            api_key_revoke(prefix=key.prefix, actor=Actor.console(request.user))
            done += 1
        self.message_user(request, f"Revoked {done} key(s).", messages.SUCCESS)

    @admin.action(description="Rotate selected API keys (new secret, same scopes; old revoked)")
    def rotate_selected(
        self, request: HttpRequest, queryset: QuerySet[ApiKey]
    ) -> HttpResponse | None:
        rotated: list[tuple[str | None, IssuedKey]] = []
        for key in queryset:
            if not can_write(request, key.org_id) or key.revoked_at is not None:
                messages.error(request, f"{key.prefix}: not rotated (revoked, or not a manager)")
                continue
            issued = api_key_rotate(prefix=key.prefix, actor=Actor.console(request.user))
            rotated.append((key.prefix, issued))
        if not rotated:
            return None
        return self._secrets_page(request, "API keys rotated", rotated)

    # Keys are revoked, never deleted: receipts keep a reference to the key that pushed them.


class MembershipInviteForm(forms.ModelForm[Membership]):
    """Adding a member sends an invitation: the person sets their own password (or signs in
    with the org's single sign-on) by following its link."""

    email = forms.EmailField(
        max_length=254,
        widget=UnfoldAdminTextInputWidget,
        help_text=(
            "An invitation is emailed to this address. The person becomes a member when they "
            "accept it, setting their own password or signing in with single sign-on."
        ),
    )

    class Meta:
        model = Membership
        fields = ["org", "role"]


@admin.register(Membership)
class MembershipAdmin(OrgScopedAdmin[Membership]):
    list_display = ["user", "org", "role", "created_at"]
    list_filter = [OrgFilter, "role"]
    search_fields = ["user__username", "org__slug"]

    def get_form(
        self,
        request: HttpRequest,
        obj: Membership | None = None,
        change: bool = False,
        **kwargs: Any,
    ) -> type[forms.ModelForm[Membership]]:
        if obj is None:
            kwargs["form"] = MembershipInviteForm
        return super().get_form(request, obj, change, **kwargs)

    def get_fields(self, request: HttpRequest, obj: Membership | None = None) -> tuple[str, ...]:
        return ("org", "email", "role") if obj is None else ("user", "org", "role")

    def get_readonly_fields(
        self, request: HttpRequest, obj: Membership | None = None
    ) -> tuple[str, ...]:
        return () if obj is None else ("user", "org")

    def save_model(self, request: HttpRequest, obj: Membership, form: Any, change: bool) -> None:
        # A refusal is shown on the form's page (OrgScopedAdmin). Adding invites; a role
        # change goes through the membership service and its one rule (roles above the
        # user's own, the last owner).
        actor = Actor.console(request.user)
        if not change:
            request._invitation = invitation_create(  # type: ignore[attr-defined]
                org=obj.org, email=form.cleaned_data["email"], role=obj.role, actor=actor
            )
            return
        saved = membership_add(
            org=obj.org, username=obj.user.get_username(), role=obj.role, actor=actor
        )
        obj.pk, obj.user = saved.pk, saved.user

    def log_addition(self, request: HttpRequest, obj: Any, message: Any) -> Any:
        # What was added is the invitation (the membership exists once it is accepted).
        return super().log_addition(request, getattr(request, "_invitation", obj), message)

    def response_add(
        self, request: HttpRequest, obj: Membership, post_url_continue: str | None = None
    ) -> HttpResponse:
        invitation: Invitation = request._invitation  # type: ignore[attr-defined]
        self.message_user(
            request,
            f"Invitation sent to {invitation.email} to join {invitation.org} as "
            f"{invitation.role}. They become a member when they accept it (the link works "
            f"until {invitation.link_expires_at:%Y-%m-%d %H:%M} UTC); send it again or revoke it "
            "under Invitations.",
            messages.SUCCESS,
        )
        return HttpResponseRedirect(reverse("admin:tenancy_invitation_changelist"))

    # Removal: one membership at a time, through the service (its rule, and the member's
    # session tokens end). The bulk delete action would log deletions before refusing.
    def has_delete_permission(self, request: HttpRequest, obj: Membership | None = None) -> bool:
        return can_write(request, self._org_id(obj), self.write_role)

    def get_actions(self, request: HttpRequest) -> dict[str, Any]:
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)
        return actions

    def delete_model(self, request: HttpRequest, obj: Membership) -> None:
        membership_remove(
            org=obj.org, username=obj.user.get_username(), actor=Actor.console(request.user)
        )

    def delete_view(
        self, request: HttpRequest, object_id: str, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        # Django's delete view is one transaction: a refusal leaves no row and no log entry.
        try:
            return super().delete_view(request, object_id, extra_context)
        except DomainError as error:
            self.message_user(request, f"Refused: {error.message}", messages.ERROR)
            return HttpResponseRedirect(
                reverse("admin:tenancy_membership_change", args=[object_id])
            )


@admin.register(Invitation)
class InvitationAdmin(OrgScopedAdmin[Invitation]):
    """Invitations are sent from "Memberships → add" (or the API, or invite_member), then
    sent again or revoked here; nobody edits one."""

    list_display = ["email", "org", "role", "status_shown", "inviter", "sent_at", "link_expires_at"]
    list_filter = [OrgFilter, "role"]
    search_fields = ["email", "org__slug"]
    readonly_fields = ["org", "email", "role", "status_shown", "inviter", "created_at",
                       "sent_at", "sent_count", "link_expires_at", "accepted_at", "accepted_by",
                       "revoked_at"]  # fmt: skip
    fields = tuple(readonly_fields)
    actions = ["resend_selected", "revoke_selected"]

    @admin.display(description="Status")
    def status_shown(self, obj: Invitation) -> str:
        return str(obj.status_at(timezone.now()).label)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # "Memberships → add" invites

    def has_change_permission(self, request: HttpRequest, obj: Invitation | None = None) -> bool:
        # Only the actions write (each through its service); the list needs this for them.
        return obj is None and super().has_change_permission(request, obj)

    def _each(
        self, request: HttpRequest, queryset: QuerySet[Invitation], act: Any, done: str
    ) -> None:
        count = 0
        for invitation in queryset.select_related("org"):
            try:
                act(org=invitation.org, invitation_id=invitation.pk,
                    actor=Actor.console(request.user))  # fmt: skip
            except DomainError as refusal:
                messages.error(request, f"{invitation.email}: {refusal.message}")
                continue
            count += 1
        self.message_user(request, f"{done} {count} invitation(s).", messages.SUCCESS)

    @admin.action(description="Send selected invitations again (new link, new expiry)")
    def resend_selected(self, request: HttpRequest, queryset: QuerySet[Invitation]) -> None:
        self._each(request, queryset, invitation_resend, "Sent again")

    @admin.action(description="Revoke selected invitations")
    def revoke_selected(self, request: HttpRequest, queryset: QuerySet[Invitation]) -> None:
        self._each(request, queryset, invitation_revoke, "Revoked")


class SsoConfigForm(forms.ModelForm[SsoConfig]):
    """The org's provider, the domains it vouches for, and a group per role (one field per
    role, so a role added to the ordering gets its field)."""

    # Not the model's field name: a form left empty must not blank the stored secret.
    new_client_secret = forms.CharField(
        label="Client secret",
        required=False,
        max_length=SsoConfig._meta.get_field("client_secret").max_length,
        widget=forms.PasswordInput(render_value=False),
        help_text="Leave empty to keep the stored one.",
    )
    issuer = forms.URLField(max_length=500, assume_scheme="https")
    domains = forms.CharField(
        label="Allowed email domains",
        widget=UnfoldAdminTextInputWidget,
        help_text="Comma-separated, e.g. example.com, example.org. Anyone else is refused.",
    )

    class Meta:
        model = SsoConfig
        fields = ["org", "enabled", "issuer", "client_id", "scopes", "groups_claim",
                  "default_role"]  # fmt: skip
        help_texts = {
            "issuer": "The provider's issuer URL (its /.well-known/openid-configuration is "
            "read). Register this console's /sso/callback as the redirect URI there.",
            "groups_claim": "The claim that lists the person's groups.",
            "default_role": "The role of someone in none of the groups below; empty: refused.",
        }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            for role, group in self.instance.role_groups.items():
                self.initial[f"group_{role}"] = group
            self.fields["domains"].initial = ", ".join(self.instance.allowed_domains)
        else:
            self.fields["new_client_secret"].required = True


# One group field per role, declared on the form class (the admin checks its fields there).
for _role in Role:
    _field = forms.CharField(
        label=f"Group for {_role.label.lower()}", required=False,
        widget=UnfoldAdminTextInputWidget,
    )  # fmt: skip
    SsoConfigForm.declared_fields[f"group_{_role.value}"] = _field
    SsoConfigForm.base_fields[f"group_{_role.value}"] = _field


@admin.register(SsoConfig)
class SsoConfigAdmin(OrgScopedAdmin[SsoConfig]):
    """Single sign-on per org: owners set it (sso_configure), whoever reads the org sees it
    without its secret."""

    form = SsoConfigForm
    write_role = Role.OWNER
    list_display = ["org", "issuer", "client_id", "enabled", "updated_at"]
    list_filter = [OrgFilter, "enabled"]

    def get_fields(self, request: HttpRequest, obj: SsoConfig | None = None) -> list[Any]:
        groups = [f"group_{role.value}" for role in Role]
        fields = ["org", "enabled", "issuer", "client_id", "new_client_secret", "scopes", "domains",
                  "groups_claim", *groups, "default_role"]  # fmt: skip
        return fields if self.has_change_permission(request, obj) else [
            "org", "enabled", "issuer", "client_id", "scopes", "allowed_domains",
            "groups_claim", "role_groups", "default_role",
        ]  # fmt: skip

    def get_readonly_fields(self, request: HttpRequest, obj: SsoConfig | None = None) -> Any:
        if obj is not None and not self.has_change_permission(request, obj):
            return self.get_fields(request, obj)
        return ("org",) if obj is not None else ()

    def save_model(self, request: HttpRequest, obj: SsoConfig, form: Any, change: bool) -> None:
        data = form.cleaned_data
        saved = sso_configure(
            org=obj.org, issuer=data["issuer"], client_id=data["client_id"],
            # Left empty: the stored one, as stored (not decrypted to be encrypted again).
            client_secret=data["new_client_secret"] or sealed(obj, "client_secret"),
            allowed_domains=data["domains"].split(","), groups_claim=data["groups_claim"],
            role_groups={role.value: data[f"group_{role.value}"].strip() for role in Role
                         if data[f"group_{role.value}"].strip()},
            default_role=data["default_role"], scopes=data["scopes"], enabled=data["enabled"],
            actor=Actor.console(request.user),
        )  # fmt: skip
        obj.pk = saved.pk


@admin.register(ScimToken)
class ScimTokenAdmin(OrgScopedAdmin[ScimToken]):
    """Provisioning (SCIM) tokens: owners issue them (the secret shown once) and revoke them."""

    write_role = Role.OWNER
    list_display = ["prefix", "org", "label", "created_at", "last_used_at", "revoked_at"]
    list_filter = [OrgFilter, "revoked_at"]
    fields = ("org", "label")
    actions = ["revoke_selected"]

    def has_change_permission(self, request: HttpRequest, obj: ScimToken | None = None) -> bool:
        return obj is None and super().has_change_permission(request, obj)

    def save_model(self, request: HttpRequest, obj: ScimToken, form: Any, change: bool) -> None:
        issued = scim_token_issue(org=obj.org, label=obj.label, actor=Actor.console(request.user))
        obj.pk, obj.prefix = issued.token.pk, issued.token.prefix
        request._scim_issued = issued  # type: ignore[attr-defined]

    def response_add(
        self, request: HttpRequest, obj: ScimToken, post_url_continue: str | None = None
    ) -> HttpResponse:
        # The secret in this response only: never in a message, never stored.
        issued = request._scim_issued  # type: ignore[attr-defined]
        context = {
            **self.admin_site.each_context(request), "title": "Provisioning token issued",
            "opts": self.model._meta, "token": issued.token, "secret": issued.secret,
            "base_url": request.build_absolute_uri("/scim/v2"),
        }  # fmt: skip
        response = TemplateResponse(request, "admin/tenancy/scimtoken/secret_once.html", context)
        response["Cache-Control"] = "no-store"
        return response

    @admin.action(description="Revoke selected provisioning tokens")
    def revoke_selected(self, request: HttpRequest, queryset: QuerySet[ScimToken]) -> None:
        for token in queryset.select_related("org"):
            scim_token_revoke(org=token.org, prefix=token.prefix,
                              actor=Actor.console(request.user))  # fmt: skip
        self.message_user(request, "Revoked.", messages.SUCCESS)


class ViaFilter(admin.SimpleListFilter):
    """The audit rows made through one way in (``ACTOR_VIAS``, a fixed vocabulary). The
    stock filter of a field without choices lists the values it finds: a DISTINCT over the
    org's whole trail on every page."""

    title = "via"
    parameter_name = "via"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(via, via) for via in ACTOR_VIAS]

    def queryset(
        self, request: HttpRequest, queryset: QuerySet[OrgAuditEvent]
    ) -> QuerySet[OrgAuditEvent]:
        value = self.value()
        return queryset.filter(via=value) if value in ACTOR_VIAS else queryset


@admin.register(OrgAuditEvent)
class OrgAuditEventAdmin(KeysetAdmin, OrgScopedAdmin[OrgAuditEvent]):
    """The org's audit trail of operator acts, whoever made them (console, API, command),
    written by the services in the transaction of each change. Nobody edits it. One org at
    a time, paged by (at, id) on the (org, at) index; kind and via look through a window."""

    list_display = ["at", "org", "kind", "summary", "via", "actor"]
    list_filter = [OrgFilter, "kind", ViaFilter]
    keyset = ("-at", "-id")
    list_per_page = 50
    search_fields = ["summary", "kind", "actor"]
    readonly_fields = ["at", "org", "kind", "summary", "detail", "via", "actor", "user", "api_key"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: OrgAuditEvent | None = None) -> bool:
        return False
