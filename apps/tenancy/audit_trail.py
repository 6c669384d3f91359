"""The org's audit trail: who acts on an org (:class:`Actor`: a console user, an API key or
dashboard user, an operator at the command line) and :func:`org_audit_record`, which every
operator service calls in the transaction of its change."""

from __future__ import annotations

import getpass
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import AnonymousUser
from django.core.management.base import CommandParser

from apps.tenancy.models import ApiKey, AuditKind, Org, OrgAuditEvent

User = AbstractBaseUser | AnonymousUser

# How an act reached the service: the console, the API (an SDK key or a dashboard user), a
# management command, or a background task (evidence export, retention). Every ``via`` an
# audit row holds is one of these; the console's filter offers exactly them.
ACTOR_VIAS = ("console", "api", "command", "task", "scim")


@dataclass(frozen=True)
class Actor:
    via: str  # one of ACTOR_VIAS
    user: User | None = None
    api_key: ApiKey | None = None
    name: str = ""  # who, in words: a username, or the command's --actor

    @classmethod
    def console(cls, user: User) -> Actor:
        return cls(via="console", user=user, name=_username(user))

    @classmethod
    def api(cls, *, api_key: ApiKey | None = None, user: User | None = None) -> Actor:
        """An SDK-plane API key, or a dashboard-plane console user."""
        name = _username(user) if user is not None else (api_key.prefix if api_key else "")
        return cls(via="api", user=user, api_key=api_key, name=name)

    @classmethod
    def command(cls, name: str = "") -> Actor:
        """An operator running a management command (``--actor`` names them)."""
        return cls(via="command", name=name)

    @property
    def user_id(self) -> int | None:
        if self.user is None or not self.user.is_authenticated:
            return None
        return int(self.user.pk)


OPERATOR = Actor.command()


def org_audit_record(
    *,
    org: Org | int,
    kind: AuditKind,
    summary: str,
    actor: Actor,
    detail: dict[str, Any] | None = None,
) -> OrgAuditEvent:
    """One row of ``org``'s audit trail: ``kind`` done by ``actor``. Call it inside the
    transaction of the change it records, so that both commit or neither does."""
    return OrgAuditEvent.objects.create(
        org_id=org if isinstance(org, int) else org.pk, kind=kind, summary=summary[:300],
        detail=detail or {}, user_id=actor.user_id, api_key=actor.api_key, via=actor.via,
        actor=actor.name[:150],
    )  # fmt: skip


def _username(user: User) -> str:
    return str(user.get_username()) if user.is_authenticated else ""


def add_actor_argument(parser: CommandParser) -> None:
    """``--actor NAME`` on every command that changes an org: who runs it, for the org's
    audit trail (default: the operating-system user)."""
    parser.add_argument(
        "--actor",
        default=None,
        help="who is acting, recorded in the org's audit trail (default: the OS user)",
    )


def command_actor(options: dict[str, Any]) -> Actor:
    name = options.get("actor") or _os_user()
    return Actor.command(name)


def _os_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a bare container)
        return ""
