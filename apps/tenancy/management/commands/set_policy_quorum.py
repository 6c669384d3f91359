from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from apps.common.commands import json_line, run_service
from apps.tenancy.audit_trail import add_actor_argument, command_actor
from apps.tenancy.selectors import org_get
from apps.tenancy.services import org_set_policy_quorum


class Command(BaseCommand):
    help = (
        "Set how many of the org's approver keys must approve a policy change before it "
        "activates (0: a deploy activates at once). An owner's act, recorded in the org's "
        "audit trail."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        add_actor_argument(parser)
        parser.add_argument("org_slug")
        parser.add_argument("quorum", type=int, help="approvals needed (k); 0 switches it off")

    def handle(self, *args: Any, **options: Any) -> None:
        org = run_service(lambda: org_get(slug=options["org_slug"]))
        org = run_service(
            lambda: org_set_policy_quorum(
                org=org, quorum=options["quorum"], actor=command_actor(options)
            )
        )
        self.stdout.write(json_line({"org": org.slug, "policy_quorum": org.policy_quorum}))
