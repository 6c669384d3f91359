import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.audit.selectors import audit_chain_verify
from apps.common.commands import json_line, run_service
from apps.tenancy.selectors import org_get


class Command(BaseCommand):
    help = (
        "Recompute an org's mirror chain from the stored receipts and re-verify every "
        "receipt; an entry whose body is retired is checked by its digest (and, with "
        "--against-archive, its archived body is read back and re-verified too). Prints "
        "one JSON line; exits 1 naming the first bad seq."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("org_slug")
        parser.add_argument(
            "--against-archive",
            action="store_true",
            help="read each retired body back from the archive storage and re-verify it",
        )

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

        check = audit_chain_verify(
            org=org,
            against_archive=options["against_archive"],
            progress=progress if show_progress else None,
        )
        if not check.ok:
            raise CommandError(f"seq {check.first_bad_seq}: {check.problem}")
        self.stdout.write(
            json_line(
                {
                    "org": org.slug,
                    "size": check.size,
                    "head": check.head,
                    "ok": True,
                    "retired": check.retired,
                    "checked_against_archive": check.checked_against_archive,
                }
            )
        )
