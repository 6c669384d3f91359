"""One rule for every membership change, in the service: nobody grants, changes or removes
a role above their own, and an org's last owner is neither demoted nor removed, whoever
asks (a member, a superuser, an operator's command)."""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

from apps.common.errors import DomainError, Forbidden, NotFound
from apps.tenancy.audit_trail import Actor
from apps.tenancy.models import Membership, Role
from apps.tenancy.services import LastOwner, membership_add, membership_remove

pytestmark = pytest.mark.django_db


def user(name: str):
    return get_user_model().objects.get(username=name)


def role_of(name: str, org: str = "acme") -> str | None:
    return (
        Membership.objects.filter(user__username=name, org__slug=org)
        .values_list("role", flat=True)
        .first()
    )


def test_a_manager_cannot_overwrite_an_owners_membership_by_adding_it_again(cast):
    with pytest.raises(Forbidden, match="a manager cannot change the role of an owner"):
        membership_add(
            org=cast.acme,
            username="acme-owner",
            role=Role.VIEWER,
            actor=Actor.console(user("acme-manager")),
        )
    assert role_of("acme-owner") == "owner"


def test_nobody_grants_a_role_above_their_own(cast):
    manager = user("acme-manager")
    with pytest.raises(Forbidden, match="a manager cannot grant the owner role"):
        membership_add(
            org=cast.acme, username="dana", role=Role.OWNER, actor=Actor.console(manager)
        )
    with pytest.raises(Forbidden, match="a manager cannot grant the owner role"):
        membership_add(
            org=cast.acme, username="acme-viewer", role=Role.OWNER, actor=Actor.console(manager)
        )
    assert not get_user_model().objects.filter(username="dana").exists()
    assert role_of("acme-viewer") == "viewer"


def test_a_manager_manages_up_to_their_own_role(cast):
    manager = user("acme-manager")
    membership_add(org=cast.acme, username="dana", role=Role.MANAGER, actor=Actor.console(manager))
    membership_add(
        org=cast.acme, username="acme-viewer", role=Role.AUDITOR, actor=Actor.console(manager)
    )
    membership_add(org=cast.acme, username="dana", role=Role.VIEWER, actor=Actor.console(manager))
    assert (role_of("dana"), role_of("acme-viewer")) == ("viewer", "auditor")
    membership_remove(org=cast.acme, username="dana", actor=Actor.console(manager))
    assert role_of("dana") is None


def test_a_manager_cannot_remove_an_owner(cast):
    with pytest.raises(Forbidden, match="a manager cannot remove an owner"):
        membership_remove(
            org=cast.acme, username="acme-owner", actor=Actor.console(user("acme-manager"))
        )
    assert role_of("acme-owner") == "owner"


@pytest.mark.parametrize("role", ["viewer", "auditor"])
def test_below_manager_nobody_changes_members(cast, role):
    with pytest.raises(Forbidden, match="needs the manager role"):
        membership_add(
            org=cast.acme,
            username="dana",
            role=Role.VIEWER,
            actor=Actor.console(user(f"acme-{role}")),
        )
    with pytest.raises(Forbidden, match="needs the manager role"):
        membership_remove(
            org=cast.acme, username="acme-viewer", actor=Actor.console(user(f"acme-{role}"))
        )


def test_a_member_of_another_org_changes_nothing_here(cast):
    membership_add(org=cast.globex, username="gina", role=Role.OWNER)
    with pytest.raises(Forbidden, match="needs the manager role"):
        membership_add(
            org=cast.acme, username="gina", role=Role.OWNER, actor=Actor.console(user("gina"))
        )


def test_the_last_owner_is_neither_demoted_nor_removed_not_even_by_an_operator(cast):
    with pytest.raises(LastOwner, match="acme-owner is the last owner of acme"):
        membership_add(org=cast.acme, username="acme-owner", role=Role.MANAGER)
    with pytest.raises(LastOwner, match="cannot be removed"):
        membership_remove(org=cast.acme, username="acme-owner")
    root = get_user_model().objects.create_superuser("root", "root@example.com", "pw")
    with pytest.raises(LastOwner):
        membership_add(
            org=cast.acme, username="acme-owner", role=Role.VIEWER, actor=Actor.console(root)
        )
    with pytest.raises(LastOwner):  # not by demoting themselves either
        membership_add(
            org=cast.acme,
            username="acme-owner",
            role=Role.VIEWER,
            actor=Actor.console(user("acme-owner")),
        )
    assert role_of("acme-owner") == "owner"
    assert LastOwner.status == 409


def test_an_owner_hands_over_then_steps_down(cast):
    owner = user("acme-owner")
    membership_add(
        org=cast.acme, username="acme-manager", role=Role.OWNER, actor=Actor.console(owner)
    )
    membership_add(
        org=cast.acme, username="acme-owner", role=Role.VIEWER, actor=Actor.console(owner)
    )
    assert (role_of("acme-manager"), role_of("acme-owner")) == ("owner", "viewer")
    membership_remove(
        org=cast.acme, username="acme-owner", actor=Actor.console(user("acme-manager"))
    )
    assert role_of("acme-owner") is None


def test_a_superuser_acts_as_an_owner_of_every_org(cast):
    root = get_user_model().objects.create_superuser("root", "root@example.com", "pw")
    membership_add(org=cast.globex, username="gina", role=Role.OWNER, actor=Actor.console(root))
    membership_add(
        org=cast.acme, username="acme-manager", role=Role.OWNER, actor=Actor.console(root)
    )
    membership_add(
        org=cast.acme, username="acme-owner", role=Role.AUDITOR, actor=Actor.console(root)
    )
    assert (role_of("gina", "globex"), role_of("acme-owner")) == ("owner", "auditor")


def test_re_adding_at_the_same_role_is_a_no_op(cast):
    before = Membership.objects.get(user__username="acme-owner")
    again = membership_add(org=cast.acme, username="acme-owner", role=Role.OWNER)
    assert (again.pk, again.role) == (before.pk, "owner")


def test_removing_a_non_member_is_not_found(cast):
    with pytest.raises(NotFound):
        membership_remove(org=cast.globex, username="acme-owner")


# --- the commands -----------------------------------------------------------------------------


def test_add_member_cannot_demote_the_last_owner(cast):
    with pytest.raises(CommandError, match="last owner of acme"):
        call_command("add_member", "acme", "acme-owner", "--role", "viewer", stdout=StringIO())
    assert role_of("acme-owner") == "owner"


def test_remove_member_removes_and_says_so_but_keeps_the_last_owner(cast):
    out = StringIO()
    call_command("remove_member", "acme", "acme-manager", stdout=out)
    assert json.loads(out.getvalue()) == {
        "org": "acme",
        "username": "acme-manager",
        "role": "manager",
    }
    assert role_of("acme-manager") is None
    with pytest.raises(CommandError, match="last owner"):
        call_command("remove_member", "acme", "acme-owner", stdout=StringIO())
    with pytest.raises(CommandError, match="not a member"):
        call_command("remove_member", "globex", "acme-owner", stdout=StringIO())


# --- concurrency (PostgreSQL row locks) -------------------------------------------------------


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_two_owners_demoting_each_other_at_once_leave_one_owner(cast):
    membership_add(org=cast.acme, username="acme-manager", role=Role.OWNER)
    barrier = threading.Barrier(2)

    def demote(pair: tuple[str, str]) -> str:
        actor, target = pair
        try:
            barrier.wait()
            membership_add(
                org=cast.acme, username=target, role=Role.VIEWER, actor=Actor.console(user(actor))
            )
            return "done"
        except DomainError as error:
            return type(error).__name__
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=2) as pool:
        outcomes = list(
            pool.map(demote, [("acme-owner", "acme-manager"), ("acme-manager", "acme-owner")])
        )
    # The second to take the org's lock sees itself as no longer an owner, or as the last one.
    assert sorted(outcomes)[0] in ("Forbidden", "LastOwner")
    assert "done" in outcomes
    assert Membership.objects.filter(org=cast.acme, role=Role.OWNER).count() == 1
