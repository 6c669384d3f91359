#!/usr/bin/env python3
"""``systemctl`` for the production guide's test, on a machine without systemd.

It replays what systemd would do with the guide's units, natively: ``daemon-reload`` does
nothing; ``enable --now UNIT...`` reads each ``$SYSTEMD_DIR/UNIT.service`` and runs its
``ExecStartPre`` lines (each must succeed) then its ``ExecStart`` in the background, in its
``WorkingDirectory``, with its ``Environment=`` and ``EnvironmentFile=``, appending the
started process ids to ``$SHIM_PIDS`` and their output to ``$SHIM_LOGS/UNIT.log``.
``RuntimeDirectory=`` is a folder beside the logs; ``User=`` is not switched (the test runs
as whoever runs the suite).
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path


def environment_file(path: Path) -> dict[str, str]:
    values = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            name, _, value = line.partition("=")
            values[name.strip()] = value.strip()
    return values


def start(unit: str) -> None:
    directives: list[tuple[str, str]] = []
    text = (Path(os.environ["SYSTEMD_DIR"]) / f"{unit}.service").read_text()
    for line in text.splitlines():
        if "=" in line and not line.lstrip().startswith(("#", "[")):
            name, _, value = line.partition("=")
            directives.append((name.strip(), value.strip()))
    env = dict(os.environ)
    cwd = None
    runtime: dict[str, str] = {}
    for name, value in directives:
        if name == "RuntimeDirectory":
            # systemd creates /run/NAME for the service; here a folder beside the logs.
            local = Path(os.environ["SHIM_LOGS"]) / "run" / value
            local.mkdir(parents=True, exist_ok=True)
            runtime[f"/run/{value}"] = str(local)
    for name, value in directives:
        for system_path, local_path in runtime.items():
            value = value.replace(system_path, local_path)
        if name == "Environment":
            key, _, val = value.partition("=")
            env[key] = val
        elif name == "EnvironmentFile":
            env.update(environment_file(Path(value.lstrip("-"))))
        elif name == "WorkingDirectory":
            cwd = value
    log = (Path(os.environ["SHIM_LOGS"]) / f"{unit}.log").open("ab")
    for name, value in directives:
        if name == "ExecStartPre":
            subprocess.run(shlex.split(value), cwd=cwd, env=env, check=True, stdout=log,
                           stderr=subprocess.STDOUT)  # fmt: skip
    (command,) = [value for name, value in directives if name == "ExecStart"]
    process = subprocess.Popen(
        shlex.split(command), cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT,
        start_new_session=True,
    )  # fmt: skip
    with open(os.environ["SHIM_PIDS"], "a") as pids:
        pids.write(f"{process.pid}\n")


def main(argv: list[str]) -> int:
    if argv[:1] == ["daemon-reload"]:
        return 0
    if argv[:2] == ["enable", "--now"]:
        for unit in argv[2:]:
            start(unit)
        return 0
    sys.stderr.write(f"systemctl (test shim): unsupported: {' '.join(argv)}\n")
    return 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
