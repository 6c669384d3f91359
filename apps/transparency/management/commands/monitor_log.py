import json
import logging
import sys
import time
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.db import DatabaseError

from apps.common.commands import json_line
from apps.transparency.client import LogClient, urllib_transport
from apps.transparency.monitor import monitor_step
from apps.transparency.services import transparency_alerts_emit

logger = logging.getLogger("apps.transparency.monitor")


class Command(BaseCommand):
    help = (
        "Follow a transparency log over HTTP (transparency.md §8): top-log consistency, "
        "leaves reproducing each checkpoint's root, one head per org per epoch in org_id "
        "order, every org head consistent with the previous one. Prints one JSON line per "
        "check; exit 2 when any alert was raised."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--log", required=True, help="the log's base URL (https://host)")
        parser.add_argument("--origin", required=True)
        parser.add_argument("--state-file", required=True, type=Path)
        parser.add_argument("--every", type=float, default=None, help="check every N seconds")
        parser.add_argument(
            "--no-events",
            action="store_true",
            help="do not record transparency.alert events (a monitor outside the deployment)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        client = LogClient(base_url=options["log"], transport=urllib_transport())
        alerted = False
        while True:
            report = monitor_step(
                client=client, origin=options["origin"], state_file=options["state_file"]
            )
            self.stdout.write(json_line(report.as_dict()))
            for alert in report.alerts:
                alerted = True
                # The alert: a log line at ERROR, and a transparency.alert event (webhooks,
                # Slack) for the orgs it concerns.
                logger.error("transparency log alert: %s", alert)
                self.stderr.write(json.dumps({"alert": alert}))
            if report.alerts and not options["no_events"]:
                try:
                    transparency_alerts_emit(alerts=report.alerts, log_url=options["log"])
                except DatabaseError:
                    logger.warning("transparency.alert events not recorded: no database")
            if options["every"] is None:
                break
            self.stdout.flush()
            time.sleep(options["every"])
        if alerted:
            sys.exit(2)
