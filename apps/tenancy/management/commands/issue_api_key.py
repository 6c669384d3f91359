from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from apps.common.commands import json_line, run_service
from apps.tenancy.audit_trail import add_actor_argument, command_actor
from apps.tenancy.selectors import org_get
from apps.tenancy.services import api_key_issue


class Command(BaseCommand):
    help = (
        "Issue an API key for an org. Prints the key's description as JSON, then the "
        "secret alone on the last line. The secret is shown only this once."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        add_actor_argument(parser)
        parser.add_argument("org_slug")
        parser.add_argument(
            "--scopes",
            required=True,
            help="comma-separated, e.g. receipts:write,policy:read,approvals:write",
        )
        parser.add_argument("--label", default="")

    def handle(self, *args: Any, **options: Any) -> None:
        org = run_service(lambda: org_get(slug=options["org_slug"]))
        issued = run_service(
            lambda: api_key_issue(
                org=org,
                scopes=options["scopes"].split(","),
                label=options["label"],
                actor=command_actor(options),
            )
        )
        key = issued.api_key
        self.stdout.write(
            json_line(
                {"org": org.slug, "prefix": key.prefix, "label": key.label, "scopes": key.scopes}
            )
        )
        self.stdout.write(issued.secret)
