"""The witness tool's logic (transparency.md §4.6): pull, verify, store, then cosign.

The witness's key is a 32-byte Ed25519 seed in a file it owns; its state (per origin, the
size and root it last cosigned) is a JSON file written durably before it signs. Nothing
here touches the service's database or settings.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nacl.signing import SigningKey

from apps.transparency.client import LogClient
from apps.transparency.state_file import state_load, state_store
from apps.transparency.tree.merkle import verify_consistency
from apps.transparency.tree.note import NoteError, cosign, parse_checkpoint, vkey_of


class WitnessAlarm(Exception):
    """The log rolled back, forked or served an inconsistent checkpoint: never cosign."""


def read_seed(path: Path) -> bytes:
    text = path.read_text().strip()
    seed = bytes.fromhex(text)
    if len(seed) != 32:
        raise ValueError("the key file holds a 32-byte Ed25519 seed as 64 hex digits")
    return seed


def new_key_file(path: Path, name: str) -> str:
    """Write a fresh seed (mode 0600) and return the witness's vkey."""
    seed = os.urandom(32)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(seed.hex() + "\n")
    return vkey_of(name, bytes(SigningKey(seed).verify_key))


@dataclass
class WitnessOutcome:
    action: str  # "cosigned" | "nothing_new" | "no_checkpoint"
    size: int
    status: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"action": self.action, "size": self.size, "status": self.status}


def witness_step(
    *,
    client: LogClient,
    origin: str,
    name: str,
    seed: bytes,
    state_file: Path,
    now: int | None = None,
) -> WitnessOutcome:
    """One pull of §4.6. Raises WitnessAlarm on rollback, fork or a failed proof."""
    note = client.checkpoint()
    if note is None:
        return WitnessOutcome(action="no_checkpoint", size=0)
    try:
        checkpoint = parse_checkpoint(note)
    except NoteError as error:
        raise WitnessAlarm(f"the log served a malformed checkpoint: {error}") from error
    if checkpoint.origin != origin:
        raise WitnessAlarm(f"the checkpoint's origin is {checkpoint.origin!r}, not {origin!r}")
    state = state_load(state_file, {})
    seen = state.get(origin)
    size, root = checkpoint.size, checkpoint.root
    if seen is not None:
        old_size, old_root = int(seen["size"]), bytes.fromhex(seen["root"])
        if size < old_size:
            raise WitnessAlarm(f"rollback: size {size} after {old_size}")
        if size == old_size:
            if root != old_root:
                raise WitnessAlarm(f"fork: another root at size {size}")
            return WitnessOutcome(action="nothing_new", size=size)
        proof = client.consistency(old_size, size)
        if not verify_consistency(old_size, size, old_root, root, proof):
            raise WitnessAlarm(f"the consistency proof {old_size} -> {size} does not verify")
    if size == 0:
        return WitnessOutcome(action="nothing_new", size=0)
    state[origin] = {"size": size, "root": root.hex()}
    state_store(state_file, state)  # durably, before signing (C2SP tlog-witness)
    line = cosign(seed, name, int(time.time()) if now is None else now, checkpoint.body)
    status, _ = client.submit_cosignature(size, line)
    return WitnessOutcome(action="cosigned", size=size, status=status)
