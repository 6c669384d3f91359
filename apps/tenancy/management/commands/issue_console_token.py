from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.common.commands import json_line, run_service
from apps.tenancy.console_tokens import console_tokens_issue
from apps.tenancy.selectors import org_get


class Command(BaseCommand):
    help = (
        "Issue a dashboard session JWT for a console member. Prints the refresh token and "
        "expiry as JSON, then the access token alone on the last line."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("org_slug")

    def handle(self, *args: Any, **options: Any) -> None:
        org = run_service(lambda: org_get(slug=options["org_slug"]))
        user = get_user_model().objects.filter(username=options["username"]).first()
        if user is None:
            raise CommandError(f"no console user {options['username']!r}")
        tokens = run_service(
            lambda: console_tokens_issue(user=user, org_slug=org.slug, via="command")
        )
        self.stdout.write(
            json_line(
                {
                    "org": org.slug,
                    "role": tokens.role,
                    "access_expires_at": tokens.access_expires_at.isoformat(),
                    "refresh": tokens.refresh,
                }
            )
        )
        self.stdout.write(tokens.access)
