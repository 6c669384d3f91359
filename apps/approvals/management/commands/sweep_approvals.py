from typing import Any

from django.core.management.base import BaseCommand

from apps.approvals.services import approvals_sweep
from apps.common.commands import json_line


class Command(BaseCommand):
    help = "Apply the on_timeout outcome of every pending approval past its expiry."

    def handle(self, *args: Any, **options: Any) -> None:
        self.stdout.write(json_line({"changed": approvals_sweep()}))
