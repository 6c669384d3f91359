from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from apps.common.commands import json_line, run_service
from apps.tenancy.audit_trail import add_actor_argument, command_actor
from apps.tenancy.models import Plan
from apps.tenancy.services import org_create


class Command(BaseCommand):
    help = "Create an org (tenant). Prints the org as one JSON line."

    def add_arguments(self, parser: CommandParser) -> None:
        add_actor_argument(parser)
        parser.add_argument("slug")
        parser.add_argument("--name", default=None)
        parser.add_argument("--plan", default=Plan.FREE, choices=Plan.values)

    def handle(self, *args: Any, **options: Any) -> None:
        org = run_service(
            lambda: org_create(
                slug=options["slug"],
                name=options["name"],
                plan=options["plan"],
                actor=command_actor(options),
            )
        )
        self.stdout.write(json_line({"slug": org.slug, "name": org.name, "plan": org.plan}))
