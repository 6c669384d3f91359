"""Root URL conf of the team-path profile (team id in the path)."""

from django.contrib import admin
from django.urls import path
from django.views.generic import RedirectView

from apps.api.health import HealthzApi, ReadyzApi
from apps.api.schema_views import schema_urlpatterns
from apps.api.scim.urls import urlpatterns as scim_urlpatterns
from apps.api.teampath.approvals import (
    ApprovalOpenApi,
    ApprovalPollApi,
    ApprovalTokenSubmitApi,
)
from apps.api.teampath.policy import TeamPolicyApi
from apps.api.teampath.receipts import ReceiptBatchPushApi, ReceiptPushApi
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
    *schema_urlpatterns("teampath"),
    path("v1/teams/<str:team_id>/policy", TeamPolicyApi.as_view(), name="team-policy"),
    # Named like the key-scoped push so the push-latency histogram covers both profiles.
    path("v1/receipts", ReceiptPushApi.as_view(), name="receipt-push"),
    path("v1/receipts/batch", ReceiptBatchPushApi.as_view(), name="receipt-push-batch"),
    path("v1/approvals", ApprovalOpenApi.as_view(), name="approval-open"),
    path("v1/approvals/<str:approval_id>", ApprovalPollApi.as_view(), name="approval-poll"),
    path(
        "v1/approvals/<str:approval_id>/token",
        ApprovalTokenSubmitApi.as_view(),
        name="approval-token",
    ),
    *log_urlpatterns("teampath"),
]

handler400 = "apps.api.handlers.bad_request"
handler404 = "apps.api.handlers.not_found"
handler500 = "apps.api.handlers.server_error"
