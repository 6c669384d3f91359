from functools import partial
from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.utils import timezone

from apps.audit.retention import retention_preview, retention_sweep
from apps.common.commands import json_line, run_service
from apps.tenancy.models import Org
from apps.tenancy.selectors import org_get


class Command(BaseCommand):
    help = (
        "Run the retention sweep now, as the worker does every RETENTION_SWEEP_SECONDS: "
        "archive, verify and retire each org's closed months past its retention "
        "(docs/retention.md); prints one JSON line of what it did and what blocked it. "
        "--dry-run writes nothing and prints, one line an org, the month the sweep would "
        "take next and what would block it, the archive storage included (a bucket must be "
        "reachable and, with object_lock=required, hold new objects under a default "
        "retention): the check to run after configuring ARCHIVE_STORAGE_URL."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("org_slugs", nargs="*", help="only these orgs (default: every org)")
        parser.add_argument("--dry-run", action="store_true", help="say what would happen")

    def handle(self, *args: Any, **options: Any) -> None:
        slugs: list[str] = options["org_slugs"]
        orgs = [run_service(partial(org_get, slug=slug)) for slug in slugs]
        orgs = orgs or list(Org.objects.order_by("pk"))
        if options["dry_run"]:
            now = timezone.now()
            for org in orgs:
                self.stdout.write(json_line(retention_preview(org=org, now=now)))
            return
        self.stdout.write(json_line(retention_sweep(orgs=orgs).as_dict()))
