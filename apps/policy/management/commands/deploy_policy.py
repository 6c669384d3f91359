from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from apps.common.commands import json_line, run_service
from apps.policy.management.commands.check_policy import read_policy_file
from apps.policy.services import policy_deploy
from apps.tenancy.audit_trail import add_actor_argument, command_actor
from apps.tenancy.selectors import org_get


class Command(BaseCommand):
    help = (
        "Validate and activate a policy TOML file for an org (same rules as POST /v1/policy); "
        "where the org has a policy quorum, propose it for its approvers instead."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        add_actor_argument(parser)
        parser.add_argument("org_slug")
        parser.add_argument("file", help="path to the policy TOML")
        parser.add_argument(
            "--expected-hash",
            help="refuse unless this is the active policy_hash (optimistic concurrency)",
        )
        parser.add_argument(
            "--break-glass",
            metavar="REASON",
            help="an owner's act where the org has a quorum: activate at once without it, "
            "for this written reason (recorded, and sent as policy.break_glass)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        org = run_service(lambda: org_get(slug=options["org_slug"]))
        toml = read_policy_file(options["file"])
        change = run_service(
            lambda: policy_deploy(
                org=org,
                toml=toml,
                expected_policy_hash=options["expected_hash"],
                actor=command_actor(options),
                break_glass_reason=options["break_glass"],
            )
        )
        version = change.version
        line: dict[str, Any] = {
            "org": org.slug,
            "policy_id": version.policy_id,
            "policy_hash": version.policy_hash,
            "rules": version.rule_count,
            "status": "active" if change.activated else "proposed",
        }
        if change.proposal is not None:
            line["proposal"] = {
                "status": change.proposal.status,
                "quorum": change.proposal.quorum,
                "approved_count": change.proposal.approved_count,
            }
        self.stdout.write(json_line(line))
