import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from apps.common.commands import json_line
from apps.transparency.errors import OriginChanged
from apps.transparency.services import transparency_publish_epoch, transparency_publish_every


class Command(BaseCommand):
    help = (
        "Run one epoch of the transparency log now (transparency.md §3.3, §9) and print one "
        "JSON line. --every N keeps running an epoch every N seconds (the periodic work)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--every", type=float, default=None, help="seconds between runs; runs until stopped"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            if options["every"] is None:
                self.stdout.write(json_line(transparency_publish_epoch().as_dict()))
                return
            for result in transparency_publish_every(seconds=max(0.1, options["every"])):
                self.stdout.write(json_line(result.as_dict()))
                self.stdout.flush()
        except OriginChanged as error:
            self.stderr.write(str(error))
            sys.exit(1)
