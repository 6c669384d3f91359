"""Invitation emails as the worker sends them: the queued tasks of the invitation mailer, run
here, and the link read from the email a person receives."""

from __future__ import annotations

import re

from django.core import mail
from django_tasks_db.models import DBTaskResult

from apps.events.emails import send_invitation_email

TASK_PATH = "apps.events.emails.send_invitation_email"
LINK = re.compile(r"https?://\S+/invitations/\S+")


def send_queued_invitations() -> int:
    """Run every queued invitation email task, as a worker would; how many were sent."""
    sent = 0
    for result in DBTaskResult.objects.filter(task_path=TASK_PATH, status="READY"):
        sent += send_invitation_email.call(*result.args_kwargs["args"])
        DBTaskResult.objects.filter(pk=result.pk).update(status="SUCCESSFUL")
    return sent


def link_sent_to(email: str) -> str:
    """The invitation link in the last email to ``email`` (after sending what is queued)."""
    send_queued_invitations()
    to_them = [message for message in mail.outbox if message.to == [email]]
    assert to_them, f"no email to {email}"
    found = LINK.search(to_them[-1].body)
    assert found, to_them[-1].body
    return found.group(0)


def path_of(link: str) -> str:
    return "/" + link.split("/", 3)[3]
