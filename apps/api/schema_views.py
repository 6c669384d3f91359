"""``GET /v1/schema`` (the profile's OpenAPI 3 document) and ``GET /v1/docs`` (Swagger UI).

The document is generated from the profile's own URL conf, so each deployment describes
exactly its routes. The docs page loads Swagger UI from this service's static files
(drf-spectacular-sidecar, served by WhiteNoise): no CDN.
"""

from __future__ import annotations

from django.urls import URLPattern, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from apps.api.openapi import profile_title


def schema_urlpatterns(profile: str) -> list[URLPattern]:
    return [
        path(
            "v1/schema",
            SpectacularAPIView.as_view(urlconf=f"config.urls.{profile}"),
            name="openapi-schema",
        ),
        path(
            "v1/docs",
            SpectacularSwaggerView.as_view(url_name="openapi-schema", title=profile_title(profile)),
            name="openapi-docs",
        ),
    ]
