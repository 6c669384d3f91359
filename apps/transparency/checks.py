"""Deployment invariants of the transparency log (ids ``mirror.E2xx``).

- ``mirror.E201``: ``TRANSPARENCY_ORIGIN`` is not a valid origin (transparency.md §1), or
  the production settings run without one set.
- ``mirror.E202``: the origin differs from the one stored with epoch 1 (a database check:
  ``manage.py check --database default``); publication refuses to run too.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, Tags
from django.core.checks import register as register_check
from django.db import DatabaseError

from apps.transparency.models import LogState
from apps.transparency.tree.note import is_valid_origin


def origin_problems(*, origin: str, required: bool) -> list[CheckMessage]:
    if required and not origin:
        problem = "TRANSPARENCY_ORIGIN is not set: the production settings need the log's origin"
    elif origin and not is_valid_origin(origin):
        problem = f"TRANSPARENCY_ORIGIN {origin!r} is not a valid origin"
    else:
        return []
    return [
        Error(
            problem,
            hint="The log's URL prefix without scheme, e.g. mirror.example.com/v1/log: "
            "non-empty, at most 255 bytes, no whitespace, no '+', no control character "
            "(transparency.md §1). It can never change once epoch 1 is published.",
            id="mirror.E201",
        )
    ]


@register_check(Tags.compatibility)
def check_origin_setting(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    return origin_problems(
        origin=settings.TRANSPARENCY_ORIGIN, required=settings.TRANSPARENCY_ORIGIN_REQUIRED
    )


@register_check(Tags.database)
def check_stored_origin(
    app_configs: Any = None, databases: Any = None, **kwargs: Any
) -> list[CheckMessage]:
    if not databases or "default" not in databases:
        return []
    try:
        stored = LogState.objects.filter(pk=1).values_list("origin", flat=True).first()
    except DatabaseError:
        return []  # not migrated yet: nothing published
    if stored and stored != settings.TRANSPARENCY_ORIGIN:
        return [
            Error(
                f"TRANSPARENCY_ORIGIN {settings.TRANSPARENCY_ORIGIN!r} differs from the "
                f"origin {stored!r} the log was published under",
                hint="The origin of epoch 1 is the log's for ever: set it back.",
                id="mirror.E202",
            )
        ]
    return []
