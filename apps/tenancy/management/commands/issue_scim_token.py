from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from apps.common.commands import json_line, run_service
from apps.tenancy.audit_trail import add_actor_argument, command_actor
from apps.tenancy.selectors import org_get
from apps.tenancy.services.scim import scim_token_issue


class Command(BaseCommand):
    help = (
        "Issue an org's SCIM 2.0 provisioning token for its identity provider; the token is "
        "printed once, alone on the last line."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        add_actor_argument(parser)
        parser.add_argument("org_slug")
        parser.add_argument("--label", default="")

    def handle(self, *args: Any, **options: Any) -> None:
        org = run_service(lambda: org_get(slug=options["org_slug"]))
        issued = run_service(
            lambda: scim_token_issue(org=org, label=options["label"], actor=command_actor(options))
        )
        self.stdout.write(json_line({"org": org.slug, "prefix": issued.token.prefix,
                                     "label": issued.token.label}))  # fmt: skip
        self.stdout.write(issued.secret)
