"""Row-level security: which orgs' rows the current database session may see.

This module is the one place the org context is set. On PostgreSQL every org-scoped table
has a policy (in each app's ``row_level_security`` migration) admitting a row only when

* its org is in ``app.org_ids`` (a comma-separated list of org ids), or
* ``app.all_orgs`` is ``on`` (operators: management commands, superusers in the console).

Both are session settings of the connection, so they must be set for every request and put
back afterwards: :func:`activate_orgs` / :func:`activate_all_orgs` are called by the
credential checks (API key, console JWT, console session), and a ``request_finished``
receiver returns the connection to the process default. A web worker's default is *no org*:
a query that forgot its org filter returns nothing rather than another tenant's rows.
Management commands and the test suite default to all orgs (``ORG_CONTEXT_DEFAULT``).

Resolving a credential happens before its org is known, so those two lookups run through
``SECURITY DEFINER`` functions owned by the migration role (see tenancy's RLS migration).
On SQLite (local trial only) all of this is a no-op.

The settings are session-level (not ``SET LOCAL``), so a connection pooler in front of
PostgreSQL must use session pooling; the state is tracked per connection so repeated
activation of the same context costs no round trip.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from django.conf import settings
from django.core.signals import request_finished
from django.db import connection
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.signals import connection_created

ALL = "all"
NONE = "none"

_SET_CONTEXT = "SELECT set_config('app.org_ids', %s, false), set_config('app.all_orgs', %s, false)"
_STATE_ATTRIBUTE = "_mirror_org_context"


def _apply(wrapper: BaseDatabaseWrapper, org_ids: str, all_orgs: bool) -> None:
    if wrapper.vendor != "postgresql":
        return
    state = (org_ids, all_orgs)
    if getattr(wrapper, _STATE_ATTRIBUTE, None) == state and wrapper.connection is not None:
        return
    with wrapper.cursor() as cursor:
        cursor.execute(_SET_CONTEXT, [org_ids, "on" if all_orgs else "off"])
    setattr(wrapper, _STATE_ATTRIBUTE, state)


def activate_orgs(org_ids: Iterable[int]) -> None:
    """Limit this connection to the rows of ``org_ids`` (empty: to no org's rows)."""
    _apply(connection, ",".join(str(int(org_id)) for org_id in sorted(set(org_ids))), False)


def activate_all_orgs() -> None:
    """Operators only: every org's rows (management commands, console superusers)."""
    _apply(connection, "", True)


def activate_default() -> None:
    if settings.ORG_CONTEXT_DEFAULT == ALL:
        activate_all_orgs()
    else:
        activate_orgs(())


@contextmanager
def org_scope(org_ids: Iterable[int]) -> Iterator[None]:
    """Run a block limited to ``org_ids``, then return to the default (tests, tools)."""
    activate_orgs(org_ids)
    try:
        yield
    finally:
        activate_default()


def _on_connection_created(sender: Any, connection: BaseDatabaseWrapper, **kwargs: Any) -> None:
    if connection.vendor != "postgresql" or connection.alias != "default":
        return
    setattr(connection, _STATE_ATTRIBUTE, None)
    default_all = settings.ORG_CONTEXT_DEFAULT == ALL
    _apply(connection, "", default_all)


def _on_request_finished(sender: Any, **kwargs: Any) -> None:
    if connection.vendor == "postgresql" and connection.connection is not None:
        activate_default()


def connect_signals() -> None:
    connection_created.connect(_on_connection_created, dispatch_uid="mirror_org_context_conn")
    request_finished.connect(_on_request_finished, dispatch_uid="mirror_org_context_request")
