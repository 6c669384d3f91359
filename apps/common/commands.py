"""Helpers shared by management commands: turn domain errors into CommandError."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

from django.core.management.base import CommandError

from apps.common.errors import DomainError

T = TypeVar("T")


def run_service(call: Callable[[], T]) -> T:
    """Run a service call; a DomainError becomes a CommandError (exit 1, message on stderr)."""
    try:
        return call()
    except DomainError as error:
        raise CommandError(error.message) from error


def json_line(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
