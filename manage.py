#!/usr/bin/env python
"""Django's command-line utility; defaults to the local settings."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")
    # Commands are operator tools and see every org's rows; the development server serves
    # requests, which see only their own org's (row-level security on PostgreSQL).
    serving = sys.argv[1:2] == ["runserver"]
    os.environ.setdefault("ORG_CONTEXT_DEFAULT", "none" if serving else "all")
    from django.core.management import execute_from_command_line

    from config.startup import exit_on_bad_configuration

    # A bad setting or an unreachable DATABASE_URL: one line naming it, exit 2.
    exit_on_bad_configuration(lambda: execute_from_command_line(sys.argv))


if __name__ == "__main__":
    main()
