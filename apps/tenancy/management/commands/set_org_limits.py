from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.common.commands import json_line, run_service
from apps.tenancy.audit_trail import add_actor_argument, command_actor
from apps.tenancy.selectors import org_get
from apps.tenancy.services import org_set_limits

LIMITS = {
    "monthly_cap": "monthly_receipt_cap",
    "rate_per_minute": "rate_per_minute",
    "burst": "rate_burst",
    "retention_days": "receipt_retention_days",
}


def _limit(option: str, raw: str) -> int | None:
    if raw == "plan":
        return None
    try:
        return int(raw)
    except ValueError:
        raise CommandError(f"--{option.replace('_', '-')} {raw!r} is not an integer") from None


class Command(BaseCommand):
    help = "Override an org's limits ('plan' as a value: back to the plan's default)."

    def add_arguments(self, parser: CommandParser) -> None:
        add_actor_argument(parser)
        parser.add_argument("org_slug")
        parser.add_argument(
            "--monthly-cap",
            help="appended receipts per calendar month (UTC); 'plan' restores the default",
        )
        parser.add_argument(
            "--rate-per-minute", help="SDK-plane sustained requests per minute, or 'plan'"
        )
        parser.add_argument("--burst", help="SDK-plane requests admitted at once, or 'plan'")
        parser.add_argument(
            "--retention-days",
            help="days receipt bodies stay in the mirror before they are archived and "
            "retired (0: for ever, else at least RETENTION_FLOOR_DAYS), or 'plan'",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        org = run_service(lambda: org_get(slug=options["org_slug"]))
        changes: dict[str, Any] = {
            field: _limit(option, options[option])
            for option, field in LIMITS.items()
            if options[option] is not None
        }
        if not changes:
            raise CommandError(
                "nothing to set: pass --monthly-cap, --rate-per-minute, --burst or --retention-days"
            )
        org = run_service(lambda: org_set_limits(org=org, **changes, actor=command_actor(options)))
        per_minute, burst = org.effective_rate
        self.stdout.write(
            json_line(
                {
                    "org": org.slug,
                    "plan": org.plan,
                    "monthly_receipt_cap": org.effective_monthly_receipt_cap,
                    "overridden": org.monthly_receipt_cap is not None,
                    "rate_per_minute": per_minute,
                    "burst": burst,
                    "rate_overridden": org.rate_per_minute is not None
                    or org.rate_burst is not None,
                    "retention_days": org.effective_receipt_retention_days,
                    "retention_overridden": org.receipt_retention_days is not None,
                }
            )
        )
