from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from apps.common.commands import json_line, run_service
from apps.tenancy.selectors import api_key_list, org_get


class Command(BaseCommand):
    help = "List an org's API keys, one JSON object per line (never the secret)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("org_slug")

    def handle(self, *args: Any, **options: Any) -> None:
        org = run_service(lambda: org_get(slug=options["org_slug"]))
        for key in api_key_list(org=org):
            self.stdout.write(
                json_line(
                    {
                        "prefix": key.prefix,
                        "label": key.label,
                        "scopes": key.scopes,
                        "revoked": key.is_revoked,
                        "created": key.created_at.isoformat(),
                    }
                )
            )
