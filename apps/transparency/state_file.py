"""The small JSON state files the witness and the monitor keep between runs: read, and
written atomically (a crash leaves the old file or the new one, never half of either)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def state_load(path: Path, empty: dict[str, Any]) -> dict[str, Any]:
    if not path.exists():
        return empty
    return json.loads(path.read_text())  # type: ignore[no-any-return]


def state_store(path: Path, state: dict[str, Any]) -> None:
    temporary = path.with_suffix(path.suffix + ".tmp")
    with open(temporary, "w") as handle:
        json.dump(state, handle, sort_keys=True)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)
