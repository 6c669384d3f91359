from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.common.commands import json_line
from apps.common.encryption import secrets_reencrypt


class Command(BaseCommand):
    help = (
        "Re-encrypt every stored secret (webhook signing secrets, single sign-on client "
        "secrets) with the first key of SECRETS_ENCRYPTION_KEYS, after a new key was put "
        "first (docs/production.md). Reads and locks a batch of rows at a time; values "
        "already under the first key are left as they are, so it may run again. Prints one "
        "JSON line of counts per model; exits 1 when some value no key decrypts (left as "
        "it is: the old key is still needed)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--batch-size", type=int, default=500, help="rows read and locked at a time"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["batch_size"] < 1:
            raise CommandError("--batch-size must be at least 1")
        counts = secrets_reencrypt(batch_size=options["batch_size"])
        self.stdout.write(json_line(counts))
        undecryptable = sum(model["undecryptable"] for model in counts.values())
        if undecryptable:
            raise CommandError(
                f"{undecryptable} stored secret(s) could not be decrypted with any key of "
                "SECRETS_ENCRYPTION_KEYS: left as they are; keep the old key in the list"
            )
