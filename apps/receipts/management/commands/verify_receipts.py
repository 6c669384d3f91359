import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.common.commands import json_line
from apps.receipts.verifier import verify_chain, verify_receipt


def split_lines(data: bytes) -> list[bytes]:
    """Lines end with LF only; U+2028/U+2029 and a lone CR are content, not separators."""
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()  # the LF that ends the last line does not start another one
    return lines


class Command(BaseCommand):
    help = (
        "Verify receipts offline: one JSON receipt per line in, one JSON verdict per line "
        "out. Exit 0 only when every line is Valid. --chain verifies the lines as one "
        "session chain and prints the chain outcome."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("source", help="a file of JSON lines, or - for standard input")
        parser.add_argument("--chain", action="store_true", help="verify the lines as one chain")

    def handle(self, *args: Any, **options: Any) -> None:
        source = options["source"]
        try:
            data = sys.stdin.buffer.read() if source == "-" else Path(source).read_bytes()
        except OSError as error:
            raise CommandError(f"cannot read {source}: {error.strerror}") from error
        lines = split_lines(data)
        if options["chain"]:
            outcome = verify_chain(lines)
            self.stdout.write(json_line(outcome))
            if outcome["kind"] != "Valid":
                sys.exit(1)
            return
        all_valid = True
        for line in lines:
            verdict = verify_receipt(line)
            shown = {key: value for key, value in verdict.as_dict().items() if key != "time_status"}
            self.stdout.write(json_line(shown))
            all_valid = all_valid and verdict.is_valid
        if not all_valid:
            sys.exit(1)
