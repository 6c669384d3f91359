import secrets
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser

from apps.tenancy.models import DEFAULT_SCOPES, Org, Plan, Role
from apps.tenancy.services import api_key_issue, membership_add, org_create


class Command(BaseCommand):
    help = (
        "Create (or reuse) a demo org with a fresh API key and a console login, and print "
        "them. For trying the service locally; `make run` calls it."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--org", default="demo")
        parser.add_argument("--username", default="demo")
        parser.add_argument("--console-url", default="http://127.0.0.1:8000/admin/")

    def handle(self, *args: Any, **options: Any) -> None:
        org = Org.objects.filter(slug=options["org"]).first() or org_create(
            slug=options["org"], name="Demo org", plan=Plan.PRO
        )
        issued = api_key_issue(org=org, scopes=DEFAULT_SCOPES, label="demo")
        password = secrets.token_urlsafe(12)
        membership = membership_add(
            org=org, username=options["username"], role=Role.OWNER, password=password
        )
        # The demo login also administers the console itself (orgs, keys, members).
        get_user_model().objects.filter(pk=membership.user.pk).update(is_superuser=True)
        self.stdout.write(
            "\n".join(
                [
                    f"org:            {org.slug}",
                    f"API key:        {issued.secret}",
                    f"console:        {options['console_url']}",
                    f"console login:  {options['username']} / {password}",
                ]
            )
        )
