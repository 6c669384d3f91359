from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from apps.common.commands import json_line, run_service
from apps.tenancy.audit_trail import add_actor_argument, command_actor
from apps.tenancy.models import Role
from apps.tenancy.selectors import org_get
from apps.tenancy.services import invitation_create, invitation_link


class Command(BaseCommand):
    help = (
        "Invite an email address to an org with a role: the invitation is emailed, and its "
        "link (one use, until it expires) is printed as the last line."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        add_actor_argument(parser)
        parser.add_argument("org_slug")
        parser.add_argument("email")
        parser.add_argument("--role", required=True, choices=Role.values)

    def handle(self, *args: Any, **options: Any) -> None:
        org = run_service(lambda: org_get(slug=options["org_slug"]))
        invitation = run_service(
            lambda: invitation_create(
                org=org, email=options["email"], role=options["role"],
                actor=command_actor(options),
            )
        )  # fmt: skip
        self.stdout.write(
            json_line(
                {
                    "org": org.slug,
                    "email": invitation.email,
                    "role": invitation.role,
                    "invitation": invitation.pk,
                    "expires_at": invitation.link_expires_at.isoformat(),
                }
            )
        )
        # Last, alone on its line: what a script (or an operator without email) hands on.
        self.stdout.write(invitation_link(invitation))
