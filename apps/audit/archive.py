"""The evidence tar on disk, and streamed back: each member spooled to an anonymous
temporary file while it is hashed and counted (:class:`Spool`), a JSON member written one
item at a time yet byte for byte what ``json.dumps(indent=1)`` writes for the whole value
(:func:`write_json`), and :class:`EvidenceArchive`, which yields the tar ``tarfile`` would
write, in chunks, with its size known beforehand. Nothing here reads the database: what
goes in is :mod:`apps.audit.members`' and :mod:`apps.audit.manifest`'s, put together by
:func:`apps.audit.evidence.evidence_export`.
"""

from __future__ import annotations

import hashlib
import json
import tarfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import datetime
from types import TracebackType
from typing import IO, Any

from blake3 import blake3

from apps.common.timestamps import utc_text

# Bytes per chunk handed to the web server.
STREAM_CHUNK = 64 * 1024


def json_text(value: Any) -> str:
    return json.dumps(value, indent=1, ensure_ascii=False, default=str) + "\n"


def json_item(value: Any) -> str:
    return json.dumps(value, indent=1, ensure_ascii=False, default=str)


def iso(moment: datetime | None) -> str | None:
    return utc_text(moment)


class Spool:
    """One member's bytes on their way into the archive: appended to a temporary file,
    hashed and counted as they are written."""

    def __init__(self, file: IO[bytes]) -> None:
        self.file = file
        self.offset = file.seek(0, 2)
        self.size = 0
        self._sha256 = hashlib.sha256()
        self._blake3 = blake3()

    def write(self, text: str) -> None:
        data = text.encode()
        self.file.write(data)
        self._sha256.update(data)
        self._blake3.update(data)
        self.size += len(data)

    def facts(self) -> dict[str, Any]:
        """The member's line in the manifest."""
        return {
            "bytes": self.size,
            "sha256": self._sha256.hexdigest(),
            "blake3": self._blake3.hexdigest(),
        }

    def discard(self) -> None:
        """Drop what this spool wrote (it was the file's last writer)."""
        self.file.seek(self.offset)
        self.file.truncate()


# Stands for the streamed list or object in the skeleton of a JSON member.
_SLOT = "\ue000streamed\ue000"


def write_json(
    spool: Spool,
    shape: Callable[[Any], Any],
    items: Iterable[Any],
    *,
    as_object: bool = False,
) -> None:
    """Write ``json_text(shape(collection))`` where the collection (a list of ``items``,
    or an object of ``(name, value)`` pairs) is never held: byte for byte what
    ``json.dumps(indent=1)`` writes, since each item is indented one space per level of
    its place in the skeleton."""
    text = json_text(shape({_SLOT: None} if as_object else [_SLOT]))
    token = json.dumps(_SLOT, ensure_ascii=False) + (": null" if as_object else "")
    at = text.index(token)
    line = text.rindex("\n", 0, at) + 1
    indent, head, tail = text[line:at], text[:line], text[at + len(token) :]
    written = False
    for item in items:
        spool.write(",\n" if written else head)
        if as_object:
            name, value = item
            piece = json.dumps(name, ensure_ascii=False) + ": " + json_item(value)
        else:
            piece = json_item(item)
        spool.write(indent + piece.replace("\n", "\n" + indent))
        written = True
    spool.write(tail if written else json_text(shape({} if as_object else [])))


@dataclass(frozen=True)
class Member:
    name: str
    file: IO[bytes] | None  # None: ``data`` holds the bytes
    offset: int
    size: int
    data: bytes = b""


class EvidenceArchive:
    """A built evidence tar, on disk: iterate it once for its bytes (``size`` of them),
    then close it (a ``with`` block, or the streaming response when it is closed)."""

    def __init__(
        self,
        *,
        root: str,
        mtime: int,
        members: list[Member],
        session_data: IO[bytes],
        session_records: IO[bytes],
        files: ExitStack,
    ) -> None:
        self._root = root
        self._mtime = mtime
        self._members = members
        self._session_data = session_data
        self._session_records = session_records
        self._files = files
        self._members_size = sum(
            len(self._header(member)) + member.size + -member.size % tarfile.BLOCKSIZE
            for member in self._all_members()
        )
        # Two zero blocks end the archive, then zeros up to a whole record.
        end = self._members_size + 2 * tarfile.BLOCKSIZE
        self.size = end + -end % tarfile.RECORDSIZE

    def _all_members(self) -> Iterator[Member]:
        yield from self._members
        self._session_records.seek(0)
        for line in self._session_records:
            name, offset, facts = json.loads(line)
            yield Member(name, self._session_data, offset, facts["bytes"])

    def _header(self, member: Member) -> bytes:
        info = tarfile.TarInfo(self._root + member.name)
        info.size = member.size
        info.mtime = self._mtime
        info.mode = 0o644
        return info.tobuf(tarfile.PAX_FORMAT, tarfile.ENCODING, "surrogateescape")

    def _pieces(self) -> Iterator[bytes]:
        """The tar as ``tarfile`` writes it: each member's header, data and padding to a
        block, two zero blocks, then zeros up to a whole record."""
        for member in self._all_members():
            yield self._header(member)
            if member.file is None:
                yield member.data
            else:
                member.file.seek(member.offset)
                left = member.size
                while left:
                    data = member.file.read(min(left, STREAM_CHUNK))
                    if not data:
                        raise RuntimeError(f"evidence spool of {member.name} ended early")
                    left -= len(data)
                    yield data
            yield bytes(-member.size % tarfile.BLOCKSIZE)
        yield bytes(self.size - self._members_size)

    def __iter__(self) -> Iterator[bytes]:
        """Chunks of ``STREAM_CHUNK`` bytes (the last one shorter)."""
        pending = bytearray()
        for piece in self._pieces():
            pending += piece
            while len(pending) >= STREAM_CHUNK:
                yield bytes(pending[:STREAM_CHUNK])
                del pending[:STREAM_CHUNK]
        if pending:
            yield bytes(pending)

    def close(self) -> None:
        self._files.close()

    def __enter__(self) -> EvidenceArchive:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
