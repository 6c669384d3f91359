"""C2SP ``tlog-tiles`` paths and entry bundles (transparency.md §6)."""

from __future__ import annotations

import re
import struct
from collections.abc import Iterable
from dataclasses import dataclass

TILE_WIDTH = 256
_GROUP_LAST = re.compile(r"^[0-9]{3}\Z")
_GROUP = re.compile(r"^x[0-9]{3}\Z")
_DECIMAL = re.compile(r"^(0|[1-9][0-9]*)\Z")


def encode_index(index: int) -> str:
    digits = str(index)
    digits = "0" * (-len(digits) % 3) + digits
    groups = [digits[i : i + 3] for i in range(0, len(digits), 3)]
    return "/".join([*("x" + group for group in groups[:-1]), groups[-1]])


def tile_path(level: int | None, index: int, width: int = TILE_WIDTH) -> str:
    """``tile/<L>/<N>[.p/<W>]``, or ``tile/entries/<N>[.p/<W>]`` for ``level`` None."""
    name = "entries" if level is None else str(level)
    path = f"tile/{name}/{encode_index(index)}"
    if width != TILE_WIDTH:
        path += f".p/{width}"
    return path


@dataclass(frozen=True)
class TileRef:
    level: int | None  # None: an entry bundle
    index: int
    width: int


def parse_tile_path(path: str) -> TileRef | None:
    """The tile a canonical path names (without the ``tile/`` prefix), or None."""
    parts = path.split("/")
    if len(parts) < 2:
        return None
    name, rest = parts[0], parts[1:]
    if name == "entries":
        level = None
    elif _DECIMAL.match(name) and int(name) <= 63:
        level = int(name)
    else:
        return None
    width = TILE_WIDTH
    if len(rest) >= 2 and rest[-2].endswith(".p"):
        width_text = rest[-1]
        if not _DECIMAL.match(width_text) or not 1 <= int(width_text) <= 255:
            return None
        width = int(width_text)
        rest = [*rest[:-2], rest[-2][:-2]]
    if not rest or not _GROUP_LAST.match(rest[-1]):
        return None
    if not all(_GROUP.match(group) for group in rest[:-1]):
        return None
    digits = "".join(group.lstrip("x") for group in rest)
    index = int(digits)
    if encode_index(index) != "/".join(rest):
        return None  # non-canonical (leading zero groups)
    return TileRef(level=level, index=index, width=width)


def tile_served(level: int, index: int, width: int, tree_size: int) -> bool:
    covered: int = (index * TILE_WIDTH + width) * TILE_WIDTH**level
    return covered <= tree_size


def entry_bundle(leaves: Iterable[bytes]) -> bytes:
    return b"".join(struct.pack(">H", len(leaf)) + leaf for leaf in leaves)
