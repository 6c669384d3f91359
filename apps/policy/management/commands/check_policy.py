from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.common.commands import json_line
from apps.policy.rules import load_policy
from apps.policy.services import policy_text_normalize


def read_policy_file(path: str) -> str:
    """The file's text as stored (its line endings are normalised where it is validated and
    deployed: ``policy_text_normalize``)."""
    try:
        raw = Path(path).read_bytes()
    except OSError as error:
        raise CommandError(f"cannot read {path}: {error.strerror}") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise CommandError(f"{path} is not UTF-8: {error}") from None


class Command(BaseCommand):
    help = (
        "Check a policy TOML file (parse and dangerous-lane floor) without deploying it. "
        'Prints {"result": "ok"|"parse_error"|"floor_bypass", "detail": ...}; exit 0 only for ok.'
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", help="path to the policy TOML")

    def handle(self, *args: Any, **options: Any) -> None:
        loaded = load_policy(policy_text_normalize(read_policy_file(options["file"])))
        self.stdout.write(json_line({"result": loaded.result, "detail": loaded.detail}))
        if not loaded.ok:
            raise SystemExit(1)
