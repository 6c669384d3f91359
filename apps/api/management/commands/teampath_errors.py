"""Print (or write into docs/teampath-errors.md) the team-path error catalogue."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.api.catalogue import END, START, catalogue_markdown

DOC = Path(settings.BASE_DIR) / "docs" / "teampath-errors.md"


def documented_catalogue(text: str) -> str:
    """The generated section of the document, markers included."""
    if START not in text or END not in text:
        raise CommandError(f"{DOC} has no catalogue markers")
    return START + text.split(START, 1)[1].split(END, 1)[0] + END


class Command(BaseCommand):
    help = "Print the team-path error catalogue generated from the error classes."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--write", action="store_true", help=f"replace the table in {DOC}")

    def handle(self, *args: Any, **options: Any) -> None:
        table = catalogue_markdown()
        if not options["write"]:
            self.stdout.write(table)
            return
        text = DOC.read_text()
        DOC.write_text(text.replace(documented_catalogue(text), table))
        self.stdout.write(f"wrote the catalogue into {DOC}")
