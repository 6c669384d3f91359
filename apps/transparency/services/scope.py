"""The transparency writers' org scope: they read and write across orgs."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from apps.tenancy.org_context import activate_all_orgs, activate_default


@contextmanager
def every_org() -> Iterator[None]:
    """The publisher reads and writes across orgs (as operator commands do)."""
    activate_all_orgs()
    try:
        yield
    finally:
        activate_default()
