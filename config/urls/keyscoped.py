"""Root URL conf of the key-scoped profile (org resolved from the API key)."""

from django.contrib import admin
from django.urls import path

urlpatterns = [
    path("admin/", admin.site.urls),
]

handler404 = "apps.common.views.keyscoped_not_found"
handler500 = "apps.common.views.keyscoped_server_error"
