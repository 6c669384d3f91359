"""The log's routes for each profile's root URL conf (transparency.md §5)."""

from __future__ import annotations

from types import ModuleType

from django.urls import URLPattern, path, register_converter

from apps.api.keyscoped import transparency as keyscoped
from apps.api.teampath import transparency as teampath


class RestOfPathConverter:
    """The rest of the path, line breaks included (``<path:>`` stops at one): whatever is
    not a tile gets the tile route's own 404 (`tile_not_found`), as documented."""

    regex = "(?s:.+)"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


register_converter(RestOfPathConverter, "rest")


def log_urlpatterns(profile: str) -> list[URLPattern]:
    views: ModuleType = keyscoped if profile == "keyscoped" else teampath
    if profile == "keyscoped":
        proof = path(
            "v1/receipts/<str:action_hash>/proof",
            keyscoped.ReceiptProofApi.as_view(),
            name="receipt-proof",
        )
    else:
        proof = path(
            "v1/receipts/<str:receipt_id>/proof",
            teampath.TeamReceiptProofApi.as_view(),
            name="receipt-proof",
        )
    return [
        proof,
        path("v1/log/checkpoint", views.CheckpointApi.as_view(), name="log-checkpoint"),
        path("v1/log/consistency", views.ConsistencyApi.as_view(), name="log-consistency"),
        path(
            "v1/log/orgs/<str:org_id>/consistency",
            views.OrgConsistencyApi.as_view(),
            name="log-org-consistency",
        ),
        path("v1/log/leaves", views.LeavesApi.as_view(), name="log-leaves"),
        path("v1/log/witnesses", views.WitnessesApi.as_view(), name="log-witnesses"),
        path("v1/log/cosignatures", views.CosignatureSubmitApi.as_view(), name="log-cosignatures"),
        path("v1/log/tile/<rest:tile>", views.TileApi.as_view(), name="log-tile"),
    ]
