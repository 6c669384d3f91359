import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from apps.common.commands import json_line
from apps.transparency.errors import WitnessInvalid
from apps.transparency.services import witness_register


class Command(BaseCommand):
    help = (
        "Register a transparency-log witness (transparency.md §4.5, §9): <key> is the b64 of "
        "a raw 32-byte Ed25519 public key, or its vkey. --deactivate stops accepting its "
        "cosignatures (accepted ones stay served)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name")
        parser.add_argument("key")
        parser.add_argument("--deactivate", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            registration = witness_register(
                name=options["name"], key=options["key"], deactivate=options["deactivate"]
            )
        except WitnessInvalid as error:
            self.stderr.write(str(error))
            sys.exit(1)
        self.stdout.write(json_line(registration.as_dict()))
