from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.audit.holds import legal_hold_payload, legal_hold_release, legal_hold_set
from apps.audit.models import HoldScope, LegalHold
from apps.audit.selectors import legal_holds
from apps.audit.window import parse_window
from apps.common.commands import json_line, run_service
from apps.tenancy.audit_trail import add_actor_argument, command_actor
from apps.tenancy.selectors import org_get


class Command(BaseCommand):
    help = (
        "Legal holds: 'set ORG --scope org|range|session --reason ...' places one (--from/--to "
        "for a range, --session for a session), 'release HOLD_ID --reason ...' lifts one, "
        "'list ORG' prints an org's holds. One JSON object per line."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        acts = parser.add_subparsers(dest="act", required=True)
        place = acts.add_parser("set", help="place a legal hold on an org")
        add_actor_argument(place)
        place.add_argument("org_slug")
        place.add_argument("--scope", required=True, choices=HoldScope.values)
        place.add_argument("--from", dest="start", help="first day held, YYYY-MM-DD (UTC)")
        place.add_argument("--to", dest="end", help="last day held, YYYY-MM-DD (UTC), inclusive")
        place.add_argument("--session", default="", help="the session id held")
        place.add_argument("--reason", required=True, help="why (a case, a request, a ticket)")
        lift = acts.add_parser("release", help="release a legal hold, for good")
        add_actor_argument(lift)
        lift.add_argument("hold_id")
        lift.add_argument("--reason", required=True, help="why the hold is lifted")
        listing = acts.add_parser("list", help="an org's legal holds, newest first")
        listing.add_argument("org_slug")
        listing.add_argument("--active", action="store_true", help="only the holds not released")

    def handle(self, *args: Any, **options: Any) -> None:
        act = options["act"]
        if act == "set":
            org = run_service(lambda: org_get(slug=options["org_slug"]))
            window = run_service(lambda: parse_window(options["start"], options["end"]))
            hold = run_service(
                lambda: legal_hold_set(
                    org=org,
                    scope=options["scope"],
                    reason=options["reason"],
                    range_start=window.start,
                    range_end=window.end,
                    session_id=options["session"],
                    actor=command_actor(options),
                )
            )
            self.stdout.write(json_line(legal_hold_payload(hold)))
        elif act == "release":
            found = (
                LegalHold.objects.select_related("org").filter(hold_id=options["hold_id"]).first()
            )
            if found is None:
                raise CommandError(f"no legal hold {options['hold_id']!r}")
            released = run_service(
                lambda: legal_hold_release(
                    hold=found, reason=options["reason"], actor=command_actor(options)
                )
            )
            self.stdout.write(json_line(legal_hold_payload(released)))
        else:
            org = run_service(lambda: org_get(slug=options["org_slug"]))
            holds = legal_holds(org=org)
            if options["active"]:
                holds = holds.filter(released_at=None)
            for each in holds:
                self.stdout.write(json_line(legal_hold_payload(each)))
