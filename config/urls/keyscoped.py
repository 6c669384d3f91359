"""Root URL conf of the key-scoped profile (org resolved from the API key)."""

from django.contrib import admin
from django.urls import path
from django.views.generic import RedirectView

from apps.api.health import HealthzApi, ReadyzApi
from apps.api.keyscoped.analytics import AnalyticsApi
from apps.api.keyscoped.approvals import (
    ApprovalAssemblyApi,
    ApprovalDetailApi,
    ApprovalOpenApi,
    ApprovalSubmitTokenApi,
    ApproverKeyRegisterApi,
)
from apps.api.keyscoped.audit import AuditChainApi, EvidenceExportApi
from apps.api.keyscoped.console_tokens import ConsoleTokenObtainApi, ConsoleTokenRefreshApi
from apps.api.keyscoped.events import (
    EmailSubscriptionsApi,
    WebhookDeliveryListApi,
    WebhookEndpointDetailApi,
    WebhookEndpointListApi,
    WebhookEndpointRotateSecretApi,
    WebhookRedeliverApi,
)
from apps.api.keyscoped.exports import (
    EvidenceExportDownloadApi,
    EvidenceExportJobApi,
    EvidenceExportRequestApi,
)
from apps.api.keyscoped.legal_holds import LegalHoldListApi, LegalHoldReleaseApi
from apps.api.keyscoped.members import (
    InvitationDetailApi,
    InvitationListApi,
    InvitationResendApi,
    InvitationRevokeApi,
)
from apps.api.keyscoped.policy import (
    PolicyApprovalsApi,
    PolicyDeployApi,
    PolicyPreviewApi,
    PolicyProposalVoteApi,
    PolicyPullApi,
    PolicyQuorumApi,
    PolicyReplayApi,
)
from apps.api.keyscoped.receipts import ReceiptPushApi
from apps.api.schema_views import schema_urlpatterns
from apps.api.scim.urls import urlpatterns as scim_urlpatterns
from apps.api.transparency_urls import log_urlpatterns
from apps.common.metrics import metrics_view
from apps.console.urls import urlpatterns as console_urlpatterns

urlpatterns = [
    # The service has no home page of its own: the root leads to the console.
    path("", RedirectView.as_view(url="/admin/", permanent=False), name="home"),
    path("admin/", admin.site.urls),
    path("healthz", HealthzApi.as_view(), name="healthz"),
    path("readyz", ReadyzApi.as_view(), name="readyz"),
    path("metrics", metrics_view, name="metrics"),
    *console_urlpatterns,
    *scim_urlpatterns,
    *schema_urlpatterns("keyscoped"),
    path("v1/receipts", ReceiptPushApi.as_view(), name="receipt-push"),
    path("v1/policy/pull", PolicyPullApi.as_view(), name="policy-pull"),
    path("v1/policy", PolicyDeployApi.as_view(), name="policy-deploy"),
    path("v1/policy/preview", PolicyPreviewApi.as_view(), name="policy-preview"),
    path("v1/policy/quorum", PolicyQuorumApi.as_view(), name="policy-quorum"),
    path(
        "v1/policy/proposals/<str:policy_id>/votes",
        PolicyProposalVoteApi.as_view(),
        name="policy-proposal-votes",
    ),
    path(
        "v1/policy/approvals/<str:policy_hash>",
        PolicyApprovalsApi.as_view(),
        name="policy-approvals",
    ),
    path("v1/policy/replays/<str:replay_id>", PolicyReplayApi.as_view(), name="policy-replay"),
    path("v1/approvals", ApprovalOpenApi.as_view(), name="approval-open"),
    path("v1/approvals/<str:action_hash>", ApprovalDetailApi.as_view(), name="approval-detail"),
    path(
        "v1/approvals/<str:action_hash>/submit-token",
        ApprovalSubmitTokenApi.as_view(),
        name="approval-submit-token",
    ),
    path(
        "v1/approvals/<str:action_hash>/assembly",
        ApprovalAssemblyApi.as_view(),
        name="approval-assembly",
    ),
    path(
        "v1/orgs/register-approver-pubkey",
        ApproverKeyRegisterApi.as_view(),
        name="approver-key-register",
    ),
    path("v1/analytics", AnalyticsApi.as_view(), name="analytics"),
    path("v1/evidence/export", EvidenceExportApi.as_view(), name="evidence-export"),
    path("v1/evidence/exports", EvidenceExportRequestApi.as_view(), name="evidence-exports"),
    path(
        "v1/evidence/exports/<str:export_id>",
        EvidenceExportJobApi.as_view(),
        name="evidence-export-job",
    ),
    path(
        "v1/evidence/exports/<str:export_id>/download",
        EvidenceExportDownloadApi.as_view(),
        name="evidence-export-download",
    ),
    path("v1/audit/chain", AuditChainApi.as_view(), name="audit-chain"),
    path("v1/legal-holds", LegalHoldListApi.as_view(), name="legal-holds"),
    path(
        "v1/legal-holds/<str:hold_id>/release",
        LegalHoldReleaseApi.as_view(),
        name="legal-hold-release",
    ),
    path("v1/webhooks", WebhookEndpointListApi.as_view(), name="webhook-endpoints"),
    path(
        "v1/webhooks/<str:endpoint_id>",
        WebhookEndpointDetailApi.as_view(),
        name="webhook-endpoint",
    ),
    path(
        "v1/webhooks/<str:endpoint_id>/rotate-secret",
        WebhookEndpointRotateSecretApi.as_view(),
        name="webhook-endpoint-rotate-secret",
    ),
    path(
        "v1/webhooks/<str:endpoint_id>/deliveries",
        WebhookDeliveryListApi.as_view(),
        name="webhook-deliveries",
    ),
    path(
        "v1/webhooks/<str:endpoint_id>/deliveries/<int:delivery_id>/redeliver",
        WebhookRedeliverApi.as_view(),
        name="webhook-redeliver",
    ),
    path("v1/notifications/email", EmailSubscriptionsApi.as_view(), name="email-subscriptions"),
    path("v1/invitations", InvitationListApi.as_view(), name="invitations"),
    path("v1/invitations/<str:invitation_id>", InvitationDetailApi.as_view(), name="invitation"),
    path(
        "v1/invitations/<str:invitation_id>/resend",
        InvitationResendApi.as_view(),
        name="invitation-resend",
    ),
    path(
        "v1/invitations/<str:invitation_id>/revoke",
        InvitationRevokeApi.as_view(),
        name="invitation-revoke",
    ),
    path("v1/console/token", ConsoleTokenObtainApi.as_view(), name="console-token"),
    path(
        "v1/console/token/refresh", ConsoleTokenRefreshApi.as_view(), name="console-token-refresh"
    ),
    *log_urlpatterns("keyscoped"),
]

handler400 = "apps.api.handlers.bad_request"
handler404 = "apps.api.handlers.not_found"
handler500 = "apps.api.handlers.server_error"
