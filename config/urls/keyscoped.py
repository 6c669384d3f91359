"""Root URL conf of the key-scoped profile (org resolved from the API key)."""

from django.contrib import admin
from django.urls import path
from django.views.generic import RedirectView

from apps.analytics.apis import AnalyticsApi
from apps.approvals.apis import (
    ApprovalAssemblyApi,
    ApprovalDetailApi,
    ApprovalOpenApi,
    ApprovalSubmitTokenApi,
    ApproverKeyRegisterApi,
)
from apps.audit.apis import AuditChainApi, EvidenceExportApi
from apps.common.health import HealthzApi, ReadyzApi
from apps.common.metrics import metrics_view
from apps.common.schema_views import schema_urlpatterns
from apps.console.urls import urlpatterns as console_urlpatterns
from apps.policy.apis import PolicyDeployApi, PolicyPreviewApi, PolicyPullApi
from apps.receipts.apis import ReceiptPushApi
from apps.tenancy.apis import ConsoleTokenObtainApi, ConsoleTokenRefreshApi
from apps.transparency.urls import log_urlpatterns

urlpatterns = [
    # The service has no home page of its own: the root leads to the console.
    path("", RedirectView.as_view(url="/admin/", permanent=False), name="home"),
    path("admin/", admin.site.urls),
    path("healthz", HealthzApi.as_view(), name="healthz"),
    path("readyz", ReadyzApi.as_view(), name="readyz"),
    path("metrics", metrics_view, name="metrics"),
    *console_urlpatterns,
    *schema_urlpatterns("keyscoped"),
    path("v1/receipts", ReceiptPushApi.as_view(), name="receipt-push"),
    path("v1/policy/pull", PolicyPullApi.as_view(), name="policy-pull"),
    path("v1/policy", PolicyDeployApi.as_view(), name="policy-deploy"),
    path("v1/policy/preview", PolicyPreviewApi.as_view(), name="policy-preview"),
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
    path("v1/audit/chain", AuditChainApi.as_view(), name="audit-chain"),
    path("v1/console/token", ConsoleTokenObtainApi.as_view(), name="console-token"),
    path(
        "v1/console/token/refresh", ConsoleTokenRefreshApi.as_view(), name="console-token-refresh"
    ),
    *log_urlpatterns("keyscoped"),
]

handler400 = "apps.common.views.keyscoped_bad_request"
handler404 = "apps.common.views.keyscoped_not_found"
handler500 = "apps.common.views.keyscoped_server_error"
