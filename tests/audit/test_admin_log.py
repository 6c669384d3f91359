"""The console's admin log is append-only: no console page edits it, and on PostgreSQL the
database refuses UPDATE and DELETE from the application role too."""

from __future__ import annotations

from http import HTTPStatus

import pytest
from django.contrib.admin.models import ADDITION, LogEntry
from django.contrib.auth import get_user_model
from django.db import DatabaseError, transaction
from django.test import Client


@pytest.fixture
def entry(cast) -> LogEntry:
    user = get_user_model().objects.get(username="acme-manager")
    return LogEntry.objects.create(
        user=user, object_repr="acme", action_flag=ADDITION, change_message="Issued"
    )


@pytest.mark.postgres
def test_the_database_refuses_to_rewrite_or_delete_log_entries(entry) -> None:
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        LogEntry.objects.filter(pk=entry.pk).update(change_message="nothing happened")
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        LogEntry.objects.filter(pk=entry.pk).delete()
    # Deleting its user would cascade to it: refused as well.
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        get_user_model().objects.filter(username="acme-manager").delete()
    assert LogEntry.objects.get(pk=entry.pk).change_message == "Issued"


def test_console_users_are_deactivated_never_deleted(cast, entry) -> None:
    get_user_model().objects.create_superuser("root", "root@example.com", "pw-root")
    client = Client()
    assert client.login(username="root", password="pw-root")
    user = get_user_model().objects.get(username="acme-manager")
    assert client.get(f"/admin/auth/user/{user.pk}/delete/").status_code == 403
    answer = client.post(
        "/admin/auth/user/", {"action": "delete_selected", "_selected_action": [user.pk],
                              "post": "yes"}
    )  # fmt: skip
    assert answer.status_code == HTTPStatus.OK  # no delete action offered: the list again
    assert get_user_model().objects.filter(pk=user.pk).exists()
    assert LogEntry.objects.filter(pk=entry.pk).exists()
