"""The environment a test hands to a child process (manage.py, gunicorn, make, a shell),
and the servers a test session starts as child processes (:func:`serving`).

The browser tests' session fixture (tests/console/conftest.py) sets
DJANGO_ALLOW_ASYNC_UNSAFE in this process for the rest of the session, since Playwright's
sync API runs an event loop in the test's thread; a child never needs it, and production's
deploy check refuses it. So every child's environment is built here, without it.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import requests

SET_BY_THE_BROWSER_TESTS = ("DJANGO_ALLOW_ASYNC_UNSAFE",)


def child_environment(*drop: str) -> dict[str, str]:
    """This process's environment without ``drop`` and what the browser tests set."""
    left_out = {*drop, *SET_BY_THE_BROWSER_TESTS}
    return {key: value for key, value in os.environ.items() if key not in left_out}


def free_port() -> int:
    """A TCP port of 127.0.0.1 nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def serving(
    command: list[str], *, env: dict[str, str], cwd: str | Path, log: Path,
    ready: Callable[[], bool], timeout: float = 60,
) -> Iterator[subprocess.Popen[bytes]]:  # fmt: skip
    """Run ``command`` (its output to ``log``) until the block ends; enter the block once
    ``ready()`` is true (a refused connection counts as not yet). A server that exits or is
    not ready by ``timeout`` seconds fails with its log."""
    with log.open("wb") as output:
        process = subprocess.Popen(
            command, cwd=cwd, env=env, stdout=output, stderr=subprocess.STDOUT
        )
        try:
            deadline = time.monotonic() + timeout
            while True:
                if process.poll() is not None:
                    output.flush()
                    raise RuntimeError(f"{command[:3]} exited: {log.read_text()}")
                try:
                    if ready():
                        break
                except requests.ConnectionError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{command[:3]} did not start: {log.read_text()}")
                time.sleep(0.2)
            yield process
        finally:
            process.terminate()
            process.wait(timeout=30)
