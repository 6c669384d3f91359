import sys
from typing import Any

from django.conf import settings
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
        parser.add_argument(
            "--periodic",
            action="store_true",
            help="run every TRANSPARENCY_EPOCH_SECONDS until stopped (exit 0 at once when 0)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        every = options["every"]
        if options["periodic"]:
            every = settings.TRANSPARENCY_EPOCH_SECONDS
            if every <= 0:
                self.stdout.write("periodic publication is off (TRANSPARENCY_EPOCH_SECONDS=0)")
                return
        try:
            if every is None:
                self.stdout.write(json_line(transparency_publish_epoch().as_dict()))
                return
            for result in transparency_publish_every(seconds=max(0.1, every)):
                self.stdout.write(json_line(result.as_dict()))
                self.stdout.flush()
        except OriginChanged as error:
            self.stderr.write(str(error))
            sys.exit(1)
