from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from apps.common.commands import json_line, run_service
from apps.tenancy.audit_trail import add_actor_argument, command_actor
from apps.tenancy.models import Role
from apps.tenancy.selectors import org_get
from apps.tenancy.services import membership_add


class Command(BaseCommand):
    help = "Give a console user a role in an org, creating the user if needed."

    def add_arguments(self, parser: CommandParser) -> None:
        add_actor_argument(parser)
        parser.add_argument("org_slug")
        parser.add_argument("username")
        parser.add_argument("--role", required=True, choices=Role.values)
        parser.add_argument("--password", default=None)

    def handle(self, *args: Any, **options: Any) -> None:
        org = run_service(lambda: org_get(slug=options["org_slug"]))
        membership = run_service(
            lambda: membership_add(
                org=org,
                username=options["username"],
                role=options["role"],
                password=options["password"],
                actor=command_actor(options),
            )
        )
        self.stdout.write(
            json_line(
                {
                    "org": org.slug,
                    "username": membership.user.get_username(),
                    "role": membership.role,
                }
            )
        )
