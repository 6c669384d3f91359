from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from apps.approvals.services import approver_key_register
from apps.common.commands import json_line, run_service
from apps.tenancy.audit_trail import add_actor_argument, command_actor
from apps.tenancy.selectors import org_get


class Command(BaseCommand):
    help = (
        "Register an approver's Ed25519 public key (standard base64) for an org. The same "
        "--key-id with another key rotates it (the old key is revoked)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        add_actor_argument(parser)
        parser.add_argument("org_slug")
        parser.add_argument("public_key", help="the 32-byte key in standard base64")
        parser.add_argument("--key-id", default=None)
        parser.add_argument("--label", default="")

    def handle(self, *args: Any, **options: Any) -> None:
        org = run_service(lambda: org_get(slug=options["org_slug"]))
        registered = run_service(
            lambda: approver_key_register(
                org=org,
                public_key=options["public_key"],
                key_id=options["key_id"],
                label=options["label"],
                actor=command_actor(options),
            )
        )
        key = registered.key
        self.stdout.write(
            json_line(
                {
                    "org": org.slug,
                    "key_id": key.key_id,
                    "public_key": key.public_key,
                    "change": registered.change,
                }
            )
        )
