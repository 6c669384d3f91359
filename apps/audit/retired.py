"""Retired receipt bodies, read back from their archives.

A retired entry keeps everything the chain and the proofs need, but not its body
(``apps.receipts.selectors.is_retired``); its body is line ``seq - first_seq`` of the
``receipts.jsonl`` of its org-month's archive (:class:`~apps.audit.models.ReceiptArchive`,
an evidence tar in ``STORAGES["archive"]``). :class:`ArchivedBodies` finds it: the first
time a month is asked for, its ``receipts.jsonl`` is copied out of the tar (streamed, never
held) to a temporary file, with a file of each line's offset beside it, so any body of the
month is then two seeks away, in constant memory, whatever the month's size.
"""

from __future__ import annotations

import struct
import tarfile
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from typing import IO

from apps.audit.models import ArchiveState, ReceiptArchive
from apps.audit.storage import archive_storage, open_stored
from apps.receipts.selectors import RETIRED_BODY
from apps.tenancy.models import Org

RECEIPTS_MEMBER = "receipts.jsonl"
_OFFSET = struct.Struct("<q")
# The archive states whose file was read back and verified: its bodies may be gone from
# the mirror (a retirement runs in batches before the record says "retired").
READABLE = (ArchiveState.VERIFIED, ArchiveState.RETIRED)


class ArchiveUnreadable(Exception):
    """An archive the mirror relies on cannot be read as it was written."""


def archive_members(file: IO[bytes]) -> Iterator[tuple[str, IO[bytes]]]:
    """Each member of an evidence tar, in order, as ``(name inside its root folder, its
    bytes)``: read as a stream (``r|``), so each member must be read before the next."""
    with tarfile.open(fileobj=file, mode="r|") as tar:
        for member in tar:
            data = tar.extractfile(member)
            if data is None:
                raise ArchiveUnreadable(f"{member.name} is not a file")
            yield member.name.split("/", 1)[-1], data


@dataclass
class _Month:
    archive: ReceiptArchive
    data: IO[bytes]
    offsets: IO[bytes]
    lines: int


class ArchivedBodies:
    """The bodies of ``org``'s retired entries, from its verified archives; the temporary
    files live as long as ``files``."""

    def __init__(self, *, org: Org, files: ExitStack) -> None:
        self._org = org
        self._files = files
        self._archives: list[ReceiptArchive] | None = None
        self._months: dict[int, _Month] = {}

    def body(self, seq: int, stored: str) -> str:
        """A row's body: its stored text, or, retired, its archived one (an archive that
        cannot answer is an error: the export must not pass a hole off as a receipt)."""
        if stored != RETIRED_BODY:
            return stored
        text = self.text(seq)
        if text is None:
            raise ArchiveUnreadable(f"no verified archive holds the body of #{seq}")
        return text

    def text(self, seq: int) -> str | None:
        """The archived body of entry ``seq``, None when no verified archive covers it."""
        archive = self.archive_of(seq)
        if archive is None:
            return None
        month = self._month(archive)
        index = seq - archive.first_seq
        if index >= month.lines:
            raise ArchiveUnreadable(f"{archive.storage_name} holds no line for #{seq}")
        month.offsets.seek(index * _OFFSET.size)
        (offset,) = _OFFSET.unpack(month.offsets.read(_OFFSET.size))
        month.data.seek(offset)
        return month.data.readline().decode().removesuffix("\n")

    def archive_of(self, seq: int) -> ReceiptArchive | None:
        if self._archives is None:
            self._archives = list(
                ReceiptArchive.objects.filter(org=self._org, state__in=READABLE).order_by(
                    "first_seq"
                )
            )
        return next((archive for archive in self._archives if archive.covers(seq)), None)

    def _month(self, archive: ReceiptArchive) -> _Month:
        known = self._months.get(archive.pk)
        if known is not None:
            return known
        # Closed with the caller's ExitStack (the export's files).
        data = self._files.enter_context(tempfile.TemporaryFile())  # noqa: SIM115
        offsets = self._files.enter_context(tempfile.TemporaryFile())  # noqa: SIM115
        lines = 0
        with open_stored(archive_storage(), archive.storage_name, archive.storage_version) as file:
            for name, member in archive_members(file):
                if name != RECEIPTS_MEMBER:
                    continue
                for line in member:
                    offsets.write(_OFFSET.pack(data.tell()))
                    data.write(line)
                    lines += 1
                break
        month = _Month(archive=archive, data=data, offsets=offsets, lines=lines)
        self._months[archive.pk] = month
        return month
