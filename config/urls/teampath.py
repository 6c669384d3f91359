"""Root URL conf of the team-path profile (team id in the path)."""

from django.contrib import admin
from django.urls import path

from apps.common.health import HealthzApi

urlpatterns = [
    path("admin/", admin.site.urls),
    path("healthz", HealthzApi.as_view(), name="healthz"),
]

handler404 = "apps.common.views.teampath_not_found"
handler500 = "apps.common.views.teampath_server_error"
