"""Row-level security: which orgs' rows the current database session may see.

This module is the one place the org context is set. On PostgreSQL every org-scoped table
has a policy (in each app's ``row_level_security`` migration) admitting a row only when

* its org is in ``app.org_ids`` (a comma-separated list of org ids), or
* ``app.all_orgs`` is ``on`` (operators: management commands, superusers in the console).

Both are session settings of the connection, so they must be set for every request and
never outlive it: :func:`activate_orgs` / :func:`activate_all_orgs` are called by the
credential checks (API key, console JWT, console session). When a request finishes, a
context it set *expires*: before the next statement on that connection runs it is put back
to the process default, unless that statement sets a context of its own (an API key
lookup) or the next request activates the same one. So a web worker's statements never
run in a previous request's context, and an SDK request pays no round trip for the reset.
Django's statements are held by an execute wrapper (installed on every new connection);
the prepared statements of the push path call :func:`settle` or set the context
themselves. A web worker's default is *no org*: a query that forgot its org filter
returns nothing rather than another tenant's rows. Management commands and the test suite
default to all orgs (``ORG_CONTEXT_DEFAULT``).

Resolving a credential happens before its org is known, so those lookups run through
``SECURITY DEFINER`` functions owned by the migration role (see tenancy's RLS migrations).
The API key resolver (:func:`lookup_api_key`) also opens the key's org in the same
statement: every SDK request costs one round trip for both. On SQLite (local trial only)
all of this is a no-op.

The settings are session-level (not ``SET LOCAL``), so a connection pooler in front of
PostgreSQL must use session pooling; the state is tracked per database session (keyed on
the psycopg connection) so repeated activation of the same context costs no round trip.
The context belongs to the request, not to the connection: when the server has ended the
session (a restart, ``idle_session_timeout``, a proxy's idle timeout) and Django opens a
new connection in the middle of a request, that connection is given the request's context
as it opens (``connection_created``), before any of the request's statements runs on it,
so a worker that remembered an API key (``key_cache``) never answers for an empty org.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any, NamedTuple
from weakref import WeakKeyDictionary

from django.conf import settings
from django.core.signals import request_finished
from django.db import connection
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.signals import connection_created

from apps.common.prepared import fetchone_checked

ALL = "all"

_SET_CONTEXT = "SELECT set_config('app.org_ids', %s, false), set_config('app.all_orgs', %s, false)"
# On the connection wrapper: the context the current request activated (None once the
# request finished: then the process default applies).
_REQUEST_ATTRIBUTE = "_mirror_org_context_wanted"
# The context each open database session has, by its psycopg connection. A new connection
# (Django replaced one the server ended: a restart, ``idle_session_timeout``, a proxy's
# idle timeout) has nothing recorded here, whatever the worker set on the one it replaced,
# so it is never taken for a session that has the request's context.
_session_context: WeakKeyDictionary[Any, tuple[str, bool]] = WeakKeyDictionary()

State = tuple[str, bool]


def _default_state() -> State:
    return ("", settings.ORG_CONTEXT_DEFAULT == ALL)


def _wanted(wrapper: BaseDatabaseWrapper) -> State:
    """The context statements on ``wrapper`` must run in now: the request's, or the default."""
    wanted: State | None = getattr(wrapper, _REQUEST_ATTRIBUTE, None)
    return wanted if wanted is not None else _default_state()


def _session_has(wrapper: BaseDatabaseWrapper) -> State | None:
    raw = wrapper.connection
    return None if raw is None else _session_context.get(raw)


def _set(wrapper: BaseDatabaseWrapper, state: State) -> None:
    """Set the session's context; straight on the open connection, so the execute wrapper
    does not run first, and standing in for Django's health check when that is still due
    (a session setting may run twice: ``fetchone_checked``)."""
    if wrapper.connection is None:
        wrapper.ensure_connection()  # a new connection: connection_created sets the context
        if _session_has(wrapper) == state:
            return
    params = [state[0], "on" if state[1] else "off"]
    if wrapper is connection:
        # May replace a connection the server ended; the new one is the one set here.
        fetchone_checked(_SET_CONTEXT, params)
    else:
        with wrapper.wrap_database_errors:
            wrapper.connection.execute(_SET_CONTEXT, params)
    _session_context[wrapper.connection] = state


def _apply(wrapper: BaseDatabaseWrapper, org_ids: str, all_orgs: bool) -> None:
    if wrapper.vendor != "postgresql":
        return
    state = (org_ids, all_orgs)
    setattr(wrapper, _REQUEST_ATTRIBUTE, state)  # also for any connection opened later
    if _session_has(wrapper) == state:
        return  # this session has it already: no round trip
    _set(wrapper, state)


def settle() -> None:
    """Give the session the context its next statement must run in (the request's, or the
    default once the request finished), if it has another. Statements that bypass
    Django's cursors call this first, unless they set a context themselves."""
    if connection.vendor != "postgresql" or connection.connection is None:
        return  # a new connection is given the context as it opens
    wanted = _wanted(connection)
    if _session_has(connection) != wanted:
        _set(connection, wanted)


# The key's row is returned whatever the digest; the org context opens only for an active
# key whose digest matches (tenancy migration 0007). The caller compares the digest again,
# in constant time, and decides.
_API_KEY_AUTHENTICATE = "SELECT * FROM mirror_api_key_authenticate(%s::text, %s::text)"


class ApiKeyRow(NamedTuple):
    """A row of ``mirror_api_key_authenticate`` (its columns, in order)."""

    key_id: int
    label: str
    prefix: str
    digest: str
    scopes: Any
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None
    org_id: int
    slug: str
    name: str
    plan: str
    monthly_receipt_cap: int
    org_created_at: datetime
    rate_per_minute: int
    rate_burst: int


def lookup_api_key(*, prefix: str, digest: str) -> ApiKeyRow | None:
    """The row of the API key named by ``prefix`` (with its org's columns), or None; on
    PostgreSQL, a key that is active and matches ``digest`` also limits this connection to
    its org, in the same round trip."""
    # An SDK request's first statement: it stands in for Django's health check, and runs
    # again on a new connection if the open one turns out dead (it only reads and sets).
    row = fetchone_checked(_API_KEY_AUTHENTICATE, [prefix, digest], ApiKeyRow._make)
    if row is not None and row.digest == digest and row.revoked_at is None:
        state = (str(int(row.org_id)), False)
        setattr(connection, _REQUEST_ATTRIBUTE, state)
        _session_context[connection.connection] = state  # the session the statement ran on
    else:
        settle()  # nothing was opened: this request must not see the previous one's rows
    return row


def activate_orgs(org_ids: Iterable[int]) -> None:
    """Limit this connection to the rows of ``org_ids`` (empty: to no org's rows)."""
    _apply(connection, ",".join(str(int(org_id)) for org_id in sorted(set(org_ids))), False)


def activate_all_orgs() -> None:
    """Operators only: every org's rows (management commands, console superusers)."""
    _apply(connection, "", True)


def activate_default() -> None:
    _apply(connection, *_default_state())


@contextmanager
def org_scope(org_ids: Iterable[int]) -> Iterator[None]:
    """Run a block limited to ``org_ids``, then return to the default (tests, tools)."""
    activate_orgs(org_ids)
    try:
        yield
    finally:
        activate_default()


def _settle_first(
    execute: Callable[..., Any], sql: str, params: Any, many: bool, context: dict[str, Any]
) -> Any:
    """Execute wrapper: no Django statement runs in a finished request's context."""
    settle()
    return execute(sql, params, many, context)


def _on_connection_created(sender: Any, connection: BaseDatabaseWrapper, **kwargs: Any) -> None:
    """A new session starts with no context of its own: it is given the current request's
    (a connection replaced in the middle of a request serves that request) or the default,
    before any statement of the request runs on it."""
    if connection.vendor != "postgresql" or connection.alias != "default":
        return
    if _settle_first not in connection.execute_wrappers:
        connection.execute_wrappers.append(_settle_first)
    _set(connection, _wanted(connection))


def _on_request_finished(sender: Any, **kwargs: Any) -> None:
    """The finished request's context expires: no round trip now (see the module doc)."""
    if connection.vendor != "postgresql":
        return
    setattr(connection, _REQUEST_ATTRIBUTE, None)


def connect_signals() -> None:
    connection_created.connect(_on_connection_created, dispatch_uid="mirror_org_context_conn")
    request_finished.connect(_on_request_finished, dispatch_uid="mirror_org_context_request")
