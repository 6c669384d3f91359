"""``manage.py restore_check``: the restore drill, run on a restored database."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.audit.restore import restore_check
from apps.common.commands import json_line


class Command(BaseCommand):
    help = (
        "Check a restored database: every org's mirror chain, the transparency log's "
        "checkpoints, and the restored log against checkpoints published before the backup "
        "(--published FILE, a checkpoint note). Prints one JSON line; exit 1 for a damaged "
        "chain or log, 2 for a rollback or fork against a published checkpoint."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--published",
            action="append",
            default=[],
            type=Path,
            metavar="FILE",
            help="a checkpoint note published before the backup (repeatable)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            notes = [path.read_text() for path in options["published"]]
        except OSError as error:
            raise CommandError(f"cannot read a published checkpoint: {error}") from error
        report = restore_check(published_notes=notes, origin=settings.TRANSPARENCY_ORIGIN)
        self.stdout.write(json_line(report.as_dict()))
        if report.problems:
            sys.exit(1)
        if report.alerts:
            sys.exit(2)
