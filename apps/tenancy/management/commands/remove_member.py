from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from apps.common.commands import json_line, run_service
from apps.tenancy.audit_trail import add_actor_argument, command_actor
from apps.tenancy.selectors import org_get
from apps.tenancy.services import membership_remove


class Command(BaseCommand):
    help = (
        "Take a console user out of an org and end their session tokens (the org's last "
        "owner stays: make another member owner first)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        add_actor_argument(parser)
        parser.add_argument("org_slug")
        parser.add_argument("username")

    def handle(self, *args: Any, **options: Any) -> None:
        org = run_service(lambda: org_get(slug=options["org_slug"]))
        membership = run_service(
            lambda: membership_remove(
                org=org, username=options["username"], actor=command_actor(options)
            )
        )
        removed = {"org": org.slug, "username": options["username"], "role": membership.role}
        self.stdout.write(json_line(removed))
