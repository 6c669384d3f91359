"""The environment a test hands to a child process (manage.py, gunicorn, make, a shell).

The browser tests' session fixture (tests/console/conftest.py) sets
DJANGO_ALLOW_ASYNC_UNSAFE in this process for the rest of the session, since Playwright's
sync API runs an event loop in the test's thread; a child never needs it, and production's
deploy check refuses it. So every child's environment is built here, without it.
"""

from __future__ import annotations

import os

SET_BY_THE_BROWSER_TESTS = ("DJANGO_ALLOW_ASYNC_UNSAFE",)


def child_environment(*drop: str) -> dict[str, str]:
    """This process's environment without ``drop`` and what the browser tests set."""
    left_out = {*drop, *SET_BY_THE_BROWSER_TESTS}
    return {key: value for key, value in os.environ.items() if key not in left_out}
