"""Root URL conf of the team-path profile (team id in the path)."""

from django.contrib import admin
from django.urls import path

from apps.common.health import HealthzApi, ReadyzApi
from apps.common.metrics import metrics_view

urlpatterns = [
    path("admin/", admin.site.urls),
    path("healthz", HealthzApi.as_view(), name="healthz"),
    path("readyz", ReadyzApi.as_view(), name="readyz"),
    path("metrics", metrics_view, name="metrics"),
]

handler404 = "apps.common.views.teampath_not_found"
handler500 = "apps.common.views.teampath_server_error"
