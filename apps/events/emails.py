"""The emails events send (plain text, through Django's email framework): their text, who
receives them, and the tasks that send them; and the direct emails the lower floors ask for
through ``apps.common.outbound.mail`` (an invitation to join an org)."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.mail import send_mail
from django.utils import timezone
from django_tasks import task

from apps.approvals.models import Approval
from apps.approvals.selectors import approval_escalation_recipients, approval_reminder_recipients
from apps.common.tasks import enqueue
from apps.events.models import EmailSubscription, Event, WebhookEndpoint
from apps.events.payloads import slack_text
from apps.tenancy.models import Invitation, InvitationStatus, Membership, Role
from apps.tenancy.services.invitations import invitation_link

_TITLES = {
    "approval.opened": "Approval opened",
    "approval.waiting_for_approvers": "Approval waiting for approvers",
    "approval.vote_recorded": "Vote recorded",
    "approval.decided": "Approval decided",
    "approval.reminder": "Reminder: your approval is waiting",
    "approval.escalated": "Approval escalated: nobody has decided yet",
}
_WHY = {
    "approval.reminder": "You receive this because one of your approver keys is on this "
    "approval's roster and you have not voted yet.",
    "approval.escalated": "You receive this because you are on the org's escalation list for "
    "this approval's rule.",
}


def event_email(event: Event) -> tuple[str, str]:
    data = event.payload
    subject = (
        f"[{event.org.name}] {_TITLES.get(event.type, event.type)}: {data.get('approval_id', '')}"
    )
    lines = [
        slack_text(event).split(" ", 1)[-1].replace("`", ""),
        "",
        f"Approval: {data.get('approval_id')}",
        f"Action hash: {data.get('action_hash')}",
        f"Status: {data.get('status')}",
    ]
    if data.get("expires_at"):
        lines.append(f"Expires: {data['expires_at']}")
    if data.get("signing_url"):
        lines += ["", f"Review and sign: {data['signing_url']}"]
    lines += [
        "",
        _WHY.get(event.type, "You receive this because you opted in to email for this event "
                 "in the console."),
    ]  # fmt: skip
    return subject, "\n".join(lines) + "\n"


def endpoint_disabled_email(endpoint: WebhookEndpoint) -> tuple[str, str]:
    subject = f"[{endpoint.org.name}] endpoint.disabled: webhook endpoint {endpoint.endpoint_id}"
    body = (
        f"The webhook endpoint {endpoint.url} ({endpoint.endpoint_id}) of {endpoint.org.name} "
        f"was disabled: {endpoint.disabled_reason}.\n\n"
        "Events are no longer sent to it. Fix the receiver, then enable the endpoint again in "
        'the console or with PATCH /v1/webhooks/{id} {"enabled": true}; failed deliveries can '
        "be sent again from its delivery log.\n"
    )
    return subject, body


def _recipients(org_id: int, user_ids: list[int]) -> list[str]:
    """Addresses of active users who are still members of the org."""
    members = Membership.objects.filter(org_id=org_id, user_id__in=user_ids).values_list(
        "user_id", flat=True
    )
    users = get_user_model().objects.filter(pk__in=list(members), is_active=True)
    return sorted({user.email for user in users if user.email})


def _send(org_id: int, user_ids: list[int], subject: str, body: str) -> int:
    """One mail to each of those members who is active and has an address; how many."""
    return sum(send_mail(subject, body, None, [to]) for to in _recipients(org_id, user_ids))


@task()
def send_event_emails(event_pk: int) -> int:
    """Email an approval event to the members who opted in to its type; how many."""
    event = Event.objects.select_related("org").get(pk=event_pk)
    user_ids = list(
        EmailSubscription.objects.filter(org_id=event.org_id, event_type=event.type).values_list(
            "user_id", flat=True
        )
    )
    return _send(event.org_id, user_ids, *event_email(event))


@task()
def send_addressed_emails(event_pk: int) -> int:
    """A reminder to the roster's members who have not voted, or an escalation to the
    escalation list: to the people it is about, whoever opted in; how many."""
    event = Event.objects.select_related("org").get(pk=event_pk)
    approval = Approval.objects.filter(
        org_id=event.org_id, approval_id=event.payload.get("approval_id")
    ).first()
    if approval is None:
        return 0
    if event.type == "approval.reminder":
        user_ids = approval_reminder_recipients(approval)
    else:
        user_ids = approval_escalation_recipients(approval)
    return _send(event.org_id, user_ids, *event_email(event))


@task()
def send_endpoint_disabled_email(endpoint_pk: int) -> int:
    """``endpoint.disabled``: tell the org's owners their endpoint stopped receiving."""
    endpoint = WebhookEndpoint.objects.select_related("org").get(pk=endpoint_pk)
    owners = list(
        Membership.objects.filter(org_id=endpoint.org_id, role=Role.OWNER).values_list(
            "user_id", flat=True
        )
    )
    return _send(endpoint.org_id, owners, *endpoint_disabled_email(endpoint))


def invitation_email(invitation: Invitation) -> tuple[str, str]:
    org = invitation.org
    who = f"{invitation.inviter} invited you" if invitation.inviter else "You are invited"
    subject = f"[{org.name}] {who} to join as {invitation.role}"
    expires = invitation.link_expires_at.strftime("%Y-%m-%d %H:%M UTC")
    body = (
        f"{who} to the console of {org.name} as {invitation.role}.\n\n"
        f"Accept the invitation: {invitation_link(invitation)}\n\n"
        "The link works once, until "
        f"{expires}; there you set a password, or sign in with your company's single "
        "sign-on where the org has set it up.\n\n"
        "If you did not expect this email, ignore it: nothing happens unless the link is "
        "followed.\n"
    )
    return subject, body


@task()
def send_invitation_email(invitation_pk: int) -> int:
    """Email the invitation's current link to the invited address, if it is still
    pending when the task runs (revoked in between: nothing is sent); how many."""
    invitation = Invitation.objects.select_related("org").filter(pk=invitation_pk).first()
    if invitation is None or invitation.status_at(timezone.now()) != InvitationStatus.PENDING:
        return 0
    return send_mail(*invitation_email(invitation), None, [invitation.email])


def enqueue_invitation_email(invitation_pk: int) -> None:
    """The mailer of ``invitation`` emails (registered with apps.common.outbound)."""
    enqueue(send_invitation_email, invitation_pk)
