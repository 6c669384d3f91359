from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from apps.common.commands import json_line, run_service
from apps.tenancy.audit_trail import add_actor_argument, command_actor
from apps.tenancy.services import api_key_revoke


class Command(BaseCommand):
    help = "Revoke an API key by its prefix. Revoking twice is harmless."

    def add_arguments(self, parser: CommandParser) -> None:
        add_actor_argument(parser)
        parser.add_argument("prefix")

    def handle(self, *args: Any, **options: Any) -> None:
        key = run_service(
            lambda: api_key_revoke(prefix=options["prefix"], actor=command_actor(options))
        )
        self.stdout.write(json_line({"prefix": key.prefix, "revoked": True}))
