import sys
from pathlib import Path
from typing import IO, Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.audit.evidence import EvidenceArchive, evidence_export, parse_window
from apps.common.commands import run_service
from apps.tenancy.audit_trail import add_actor_argument, command_actor
from apps.tenancy.selectors import org_get


def _copy(archive: EvidenceArchive, out: IO[bytes]) -> None:
    for chunk in archive:
        out.write(chunk)


class Command(BaseCommand):
    help = (
        "Export an org's evidence tar (receipts, chain window, approvals, approver keys, "
        "manifest, VERIFY.md). --output - writes the tar to stdout."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        add_actor_argument(parser)
        parser.add_argument("org_slug")
        parser.add_argument("--output", required=True, help="a file path, or - for stdout")
        parser.add_argument("--from", dest="start", help="first day, YYYY-MM-DD (UTC)")
        parser.add_argument("--to", dest="end", help="last day, YYYY-MM-DD (UTC), inclusive")

    def handle(self, *args: Any, **options: Any) -> None:
        org = run_service(lambda: org_get(slug=options["org_slug"]))
        window = run_service(lambda: parse_window(options["start"], options["end"]))
        with evidence_export(org=org, window=window, actor=command_actor(options)) as archive:
            if options["output"] == "-":
                _copy(archive, sys.stdout.buffer)
                sys.stdout.buffer.flush()
                return
            try:
                with Path(options["output"]).open("wb") as out:
                    _copy(archive, out)
            except OSError as error:
                raise CommandError(f"cannot write {options['output']}: {error.strerror}") from None
            self.stderr.write(f"wrote {archive.size} bytes to {options['output']}")
