import json
import sys
import time
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.common.commands import json_line
from apps.transparency.client import LogClient, LogUnavailable, urllib_transport
from apps.transparency.witness import WitnessAlarm, new_key_file, read_seed, witness_step


class Command(BaseCommand):
    help = (
        "Play an independent witness of a transparency log (transparency.md §4.6). "
        "`witness keygen NAME KEY_FILE` writes a new Ed25519 seed and prints the vkey to "
        "register; `witness run --log URL --origin O --name N --key-file F --state-file S` "
        "pulls the checkpoint, verifies consistency with what it cosigned before, and cosigns. "
        "Exit 2 on an alarm (rollback, fork, inconsistent log): never cosign then."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        keygen = sub.add_parser("keygen")
        keygen.add_argument("name")
        keygen.add_argument("key_file", type=Path)
        run = sub.add_parser("run")
        run.add_argument("--log", required=True, help="the log's base URL (https://host)")
        run.add_argument("--origin", required=True)
        run.add_argument("--name", required=True)
        run.add_argument("--key-file", required=True, type=Path)
        run.add_argument("--state-file", required=True, type=Path)
        run.add_argument("--every", type=float, default=None, help="poll every N seconds")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["action"] == "keygen":
            try:
                vkey = new_key_file(options["key_file"], options["name"])
            except OSError as error:
                raise CommandError(f"cannot write {options['key_file']}: {error}") from error
            self.stdout.write(json_line({"name": options["name"], "vkey": vkey}))
            return
        try:
            seed = read_seed(options["key_file"])
        except (OSError, ValueError) as error:
            raise CommandError(f"cannot read the key file: {error}") from error
        client = LogClient(base_url=options["log"], transport=urllib_transport())
        while True:
            try:
                outcome = witness_step(
                    client=client,
                    origin=options["origin"],
                    name=options["name"],
                    seed=seed,
                    state_file=options["state_file"],
                )
                self.stdout.write(json_line(outcome.as_dict()))
            except WitnessAlarm as alarm:
                self.stderr.write(json.dumps({"alarm": str(alarm)}))
                sys.exit(2)
            except LogUnavailable as error:
                self.stderr.write(json.dumps({"error": str(error)}))
                if options["every"] is None:
                    sys.exit(1)
            if options["every"] is None:
                return
            self.stdout.flush()
            time.sleep(options["every"])
