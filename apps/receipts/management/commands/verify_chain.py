import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.common.commands import json_line, run_service
from apps.receipts.selectors import mirror_chain_check
from apps.tenancy.selectors import org_get


class Command(BaseCommand):
    help = (
        "Recompute an org's mirror chain from the stored receipts and re-verify every "
        "receipt. Prints one JSON line; exits 1 naming the first bad seq."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("org_slug")

    def handle(self, *args: Any, **options: Any) -> None:
        org = run_service(lambda: org_get(slug=options["org_slug"]))
        show_progress = sys.stderr.isatty()

        def progress(done: int, total: int) -> None:
            if done % 100 == 0 or done == total:
                width = 30
                filled = width * done // max(total, 1)
                sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total}")
                if done == total:
                    sys.stderr.write("\n")

        check = mirror_chain_check(org=org, progress=progress if show_progress else None)
        if not check.ok:
            raise CommandError(f"seq {check.first_bad_seq}: {check.problem}")
        self.stdout.write(
            json_line({"org": org.slug, "size": check.size, "head": check.head, "ok": True})
        )
