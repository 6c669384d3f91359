"""The log's routes for each profile's root URL conf (transparency.md §5)."""

from __future__ import annotations

from django.urls import URLPattern, path

from apps.api.transparency import KEYSCOPED, TEAMPATH, ReceiptProofApi, TeamReceiptProofApi


def log_urlpatterns(profile: str) -> list[URLPattern]:
    views = KEYSCOPED if profile == "keyscoped" else TEAMPATH
    if profile == "keyscoped":
        proof = path(
            "v1/receipts/<str:action_hash>/proof", ReceiptProofApi.as_view(), name="receipt-proof"
        )
    else:
        proof = path(
            "v1/receipts/<str:receipt_id>/proof",
            TeamReceiptProofApi.as_view(),
            name="receipt-proof",
        )
    return [
        proof,
        path("v1/log/checkpoint", views["checkpoint"].as_view(), name="log-checkpoint"),
        path("v1/log/consistency", views["consistency"].as_view(), name="log-consistency"),
        path(
            "v1/log/orgs/<str:org_id>/consistency",
            views["org_consistency"].as_view(),
            name="log-org-consistency",
        ),
        path("v1/log/leaves", views["leaves"].as_view(), name="log-leaves"),
        path("v1/log/witnesses", views["witnesses"].as_view(), name="log-witnesses"),
        path("v1/log/cosignatures", views["cosignatures"].as_view(), name="log-cosignatures"),
        path("v1/log/tile/<path:tile>", views["tile"].as_view(), name="log-tile"),
    ]
