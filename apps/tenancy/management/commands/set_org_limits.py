from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.common.commands import json_line, run_service
from apps.tenancy.selectors import org_get
from apps.tenancy.services import org_set_limits


class Command(BaseCommand):
    help = "Override an org's limits (empty value: back to the plan's default)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("org_slug")
        parser.add_argument(
            "--monthly-cap",
            help="appended receipts per calendar month (UTC); 'plan' restores the default",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        org = run_service(lambda: org_get(slug=options["org_slug"]))
        raw_cap = options["monthly_cap"]
        if raw_cap is None:
            raise CommandError("nothing to set: pass --monthly-cap")
        cap: int | None
        if raw_cap == "plan":
            cap = None
        else:
            try:
                cap = int(raw_cap)
            except ValueError:
                raise CommandError(f"--monthly-cap {raw_cap!r} is not an integer") from None
        org = run_service(lambda: org_set_limits(org=org, monthly_receipt_cap=cap))
        self.stdout.write(
            json_line(
                {
                    "org": org.slug,
                    "plan": org.plan,
                    "monthly_receipt_cap": org.effective_monthly_receipt_cap,
                    "overridden": org.monthly_receipt_cap is not None,
                }
            )
        )
