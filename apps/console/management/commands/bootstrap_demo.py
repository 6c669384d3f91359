"""``make run``'s demo (apps.console.demo), and how to use it, printed with real values."""

from __future__ import annotations

import errno
import socket
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.common.commands import run_service
from apps.console.demo import demo_bootstrap


def check_port_free(bind: str) -> None:
    """Refuse before anything is written or printed when ``bind`` (host:port) is taken.

    Taken means what would make the development server's own bind fail: a live listener.
    The probe sets ``SO_REUSEADDR`` as that server does (socketserver's
    ``allow_reuse_address``), so the connections a stopped server leaves behind (a browser
    tab's kept-alive connection holds its socket in ``FIN_WAIT_2``, then ``TIME_WAIT``) do
    not make a free port look taken, while a listener still refuses it.
    """
    host, _, port_text = bind.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    try:
        port = int(port_text)
    except ValueError:
        raise CommandError(f"HOST={bind!r}: expected host:port, e.g. 127.0.0.1:8000") from None
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as error:
            reason = "in use" if error.errno == errno.EADDRINUSE else error.strerror
            raise CommandError(
                f"{host}:{port} is not available ({reason}): stop what holds it, or choose "
                "another with `make run HOST=127.0.0.1:8001`."
            ) from None


class Command(BaseCommand):
    help = (
        "Create (or reuse) the demo org: mirrored receipts, an approver key, a pending "
        "approval, the example policy, an API key and a console login; print how to use "
        "them. Idempotent; `make run` calls it."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--org", default="demo")
        parser.add_argument("--username", default="demo")
        parser.add_argument(
            "--bind",
            default=None,
            help="host:port the server will listen on: checked free first, and used for the "
            "printed URLs (default 127.0.0.1:8000, not checked)",
        )
        parser.add_argument(
            "--migrate",
            action="store_true",
            help="apply the migrations first, after the --bind check (what `make run` does)",
        )
        parser.add_argument("--console-url", default=None, help="default: from --bind")
        parser.add_argument(
            "--state-dir", default=None, help="where the demo's secrets are kept (LOCAL_DATA_DIR)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["bind"]:
            check_port_free(options["bind"])
        if options["migrate"]:
            # The project's migrate (apps.common): as MIGRATION_DATABASE_URL's role when set,
            # with the database checks `manage.py migrate` runs (the application role, the
            # log's origin).
            call_command(
                "migrate",
                interactive=False,
                skip_checks=False,
                verbosity=options["verbosity"],
                stdout=self.stdout,
                stderr=self.stderr,
            )
        console_url = (
            options["console_url"] or f"http://{options['bind'] or '127.0.0.1:8000'}/admin/"
        )
        base = console_url.removesuffix("/admin/").rstrip("/")
        demo = run_service(
            lambda: demo_bootstrap(
                slug=options["org"],
                username=options["username"],
                state_dir=Path(options["state_dir"] or settings.LOCAL_DATA_DIR),
            )
        )
        self.stdout.write(
            "\n".join(
                [
                    f"Countersign demo: org {demo.org.slug!r} ({demo.receipts_appended} "
                    "receipts seeded now; seeding is idempotent)",
                    "",
                    "Push your first signed receipt (minted by the heso SDK):",
                    f"  curl -sS -X POST {base}/v1/receipts \\",
                    f"    -H 'Authorization: Bearer {demo.api_key}' \\",
                    "    -H 'Content-Type: application/json' \\",
                    f"    --data-binary @{demo.first_receipt_file}",
                    "",
                    "Point the heso SDK here:",
                    f'  heso.cloud.configure(api_key="{demo.api_key}", endpoint="{base}")',
                    f"  export HESO_CONSOLE_URL={base}",
                    "",
                    f"console:        {console_url}",
                    f"console login:  {demo.username} / {demo.password}",
                    f"API key:        {demo.api_key}",
                    f"API docs:       {base}/v1/docs",
                    f"verify:         {base}/verify",
                    f"approve:        {base}/approve/",
                    "",
                    f"Demo approver key {demo.approver_key_id} (DEMO ONLY, never use it for "
                    "real approvals):",
                    f"  public key:   {demo.approver_public_key}",
                    f"  private seed: {demo.approver_seed_hex}",
                    f"Secrets kept in {demo.state_file} (delete it to issue new ones).",
                ]
            )
        )
