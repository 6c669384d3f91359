"""Deployment checks of outbound events (stable ids, each tested)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.apps import AppConfig
from django.conf import settings
from django.core.checks import CheckMessage, Warning


def private_destinations_allowed(
    app_configs: Sequence[AppConfig] | None = None, **kwargs: Any
) -> list[CheckMessage]:
    if settings.WEBHOOK_ALLOW_PRIVATE_DESTINATIONS:
        return [
            Warning(
                "WEBHOOK_ALLOW_PRIVATE_DESTINATIONS is on: webhooks may reach private, loopback "
                "and link-local addresses (this host, the cloud metadata service, the LAN).",
                hint="Leave it off in production; it exists for development and tests.",
                id="mirror.W020",
            )
        ]
    return []
