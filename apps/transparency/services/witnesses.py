"""Witnesses and their cosignatures: registering, rotating and deactivating a witness key
(§4.5, §9) and accepting a witness's cosignature of a checkpoint (§5.6)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from apps.common.errors import InvalidInput
from apps.transparency.errors import (
    CheckpointNotFound,
    CosignatureInvalid,
    WitnessInvalid,
    WitnessUnknown,
)
from apps.transparency.models import Checkpoint, Cosignature, Witness
from apps.transparency.tree.note import (
    MAX_TIMESTAMP,
    NoteError,
    b64decode_strict,
    cosignature_verifies,
    is_valid_key_name,
    parse_cosignature_line,
    parse_vkey,
    vkey_of,
)

COSIGNATURE_MAX_FUTURE_SECONDS = 300


@dataclass(frozen=True)
class WitnessRegistration:
    witness: Witness
    status: str  # registered | unchanged | rotated | deactivated

    def as_dict(self) -> dict[str, str]:
        return {
            "name": self.witness.name,
            "key_id": self.witness.key_id,
            "vkey": self.witness.vkey,
            "status": self.status,
        }


def _witness_key(name: str, key: str) -> bytes:
    if not is_valid_key_name(name) or len(name.encode("utf-8")) > 255:
        raise WitnessInvalid(
            "a witness name is non-empty, at most 255 bytes, without whitespace or '+'"
        )
    if name == settings.TRANSPARENCY_ORIGIN:
        raise WitnessInvalid("a witness name must differ from the log's origin")
    raw = b64decode_strict(key)
    if raw is not None and len(raw) == 32:
        return raw
    try:
        parsed = parse_vkey(key)
    except NoteError as error:
        raise WitnessInvalid(
            f"the key is neither b64 of a 32-byte Ed25519 key nor a vkey: {error}"
        ) from error
    if parsed.name != name:
        raise WitnessInvalid(f"the vkey names {parsed.name!r}, not {name!r}")
    return parsed.public_key


@transaction.atomic
def witness_register(*, name: str, key: str, deactivate: bool = False) -> WitnessRegistration:
    """Register (or rotate to, or deactivate) a witness key (§4.5, §9)."""
    public_key = _witness_key(name, key)
    vkey = vkey_of(name, public_key)
    now = timezone.now()
    existing = Witness.objects.select_for_update().filter(vkey=vkey).first()
    if deactivate:
        if existing is None:
            raise WitnessInvalid(f"no registered witness key {vkey}")
        if existing.active:
            existing.active = False
            existing.deactivated_at = now
            existing.save(update_fields=["active", "deactivated_at"])
        return WitnessRegistration(witness=existing, status="deactivated")
    if existing is not None and existing.active:
        return WitnessRegistration(witness=existing, status="unchanged")
    others = Witness.objects.select_for_update().filter(name=name, active=True)
    rotated = others.exclude(vkey=vkey).update(active=False, deactivated_at=now) > 0
    if existing is None:
        existing = Witness.objects.create(
            name=name, public_key=public_key, key_id=parse_vkey(vkey).key_id.hex(), vkey=vkey
        )
    else:
        existing.active = True
        existing.deactivated_at = None
        existing.save(update_fields=["active", "deactivated_at"])
    return WitnessRegistration(witness=existing, status="rotated" if rotated else "registered")


# -- cosignatures ------------------------------------------------------------------------


@dataclass(frozen=True)
class CosignatureResult:
    cosignature: Cosignature
    created: bool

    def as_dict(self) -> dict[str, object]:
        return {
            "status": "accepted" if self.created else "duplicate",
            "checkpoint_size": self.cosignature.checkpoint.size,
            "witness": self.cosignature.witness.name,
            "key_id": self.cosignature.witness.key_id,
            "timestamp": self.cosignature.timestamp,
        }


def cosignature_submit(
    *, checkpoint_size: object, cosignature: object, now: datetime | None = None
) -> CosignatureResult:
    """§5.6, its checks in order; accepted only if it verifies over the stored body."""
    if not isinstance(checkpoint_size, int) or isinstance(checkpoint_size, bool):
        raise InvalidInput("checkpoint_size must be an integer >= 1")
    if checkpoint_size < 1:
        raise InvalidInput("checkpoint_size must be an integer >= 1")
    if not isinstance(cosignature, str):
        raise InvalidInput("cosignature must be a string (a cosignature/v1 line)")
    try:
        parsed = parse_cosignature_line(cosignature)
    except NoteError as error:
        raise CosignatureInvalid(f"not a cosignature line: {error}") from error
    witness = (
        Witness.objects.filter(name=parsed.name, key_id=parsed.key_id.hex(), active=True)
        .order_by("pk")
        .first()
    )
    if witness is None:
        raise WitnessUnknown(f"no active registered witness {parsed.name} {parsed.key_id.hex()}")
    checkpoint = (
        Checkpoint.objects.filter(size=checkpoint_size).first()
        if checkpoint_size <= MAX_TIMESTAMP  # the largest bigint
        else None
    )
    if checkpoint is None:
        raise CheckpointNotFound(f"no checkpoint of size {checkpoint_size}")
    moment = now or timezone.now()
    if parsed.timestamp > MAX_TIMESTAMP or (
        parsed.timestamp > moment.timestamp() + COSIGNATURE_MAX_FUTURE_SECONDS
    ):
        raise CosignatureInvalid("the cosignature's time is too far in the future")
    key = parse_vkey(witness.vkey)
    if not cosignature_verifies(key, parsed, checkpoint.body):
        raise CosignatureInvalid("the cosignature does not verify over the checkpoint's body")
    for _ in range(2):
        try:
            with transaction.atomic():
                stored = (
                    Cosignature.objects.select_for_update()
                    .filter(checkpoint=checkpoint, witness=witness)
                    .first()
                )
                if stored is None:
                    created = Cosignature.objects.create(
                        checkpoint=checkpoint,
                        witness=witness,
                        timestamp=parsed.timestamp,
                        line=parsed.line,
                        accepted_at=moment,
                    )
                    return CosignatureResult(cosignature=created, created=True)
                if parsed.timestamp > stored.timestamp:
                    stored.timestamp = parsed.timestamp
                    stored.line = parsed.line
                    stored.accepted_at = moment
                    stored.save(update_fields=["timestamp", "line", "accepted_at"])
                return CosignatureResult(cosignature=stored, created=False)
        except IntegrityError:
            continue  # a concurrent first submission won: read it as a duplicate
    raise CosignatureInvalid("the cosignature could not be stored; submit it again")
