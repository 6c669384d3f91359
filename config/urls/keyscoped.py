"""Root URL conf of the key-scoped profile (org resolved from the API key)."""

from django.contrib import admin
from django.urls import path

from apps.common.health import HealthzApi, ReadyzApi
from apps.common.metrics import metrics_view
from apps.receipts.apis import ReceiptPushApi
from apps.tenancy.apis import ConsoleTokenObtainApi, ConsoleTokenRefreshApi

urlpatterns = [
    path("admin/", admin.site.urls),
    path("healthz", HealthzApi.as_view(), name="healthz"),
    path("readyz", ReadyzApi.as_view(), name="readyz"),
    path("metrics", metrics_view, name="metrics"),
    path("v1/receipts", ReceiptPushApi.as_view(), name="receipt-push"),
    path("v1/console/token", ConsoleTokenObtainApi.as_view(), name="console-token"),
    path(
        "v1/console/token/refresh", ConsoleTokenRefreshApi.as_view(), name="console-token-refresh"
    ),
]

handler404 = "apps.common.views.keyscoped_not_found"
handler500 = "apps.common.views.keyscoped_server_error"
