"""Secrets the service must read back (webhook signing secrets, single sign-on client
secrets), encrypted at rest, so a database dump or backup does not hold them in clear.

A stored value is ``enc:v1:`` followed by a Fernet token (AES-128-CBC and HMAC-SHA256).
The keys are ``SECRETS_ENCRYPTION_KEYS``: the first encrypts, every one decrypts (a
MultiFernet), so a new key is put first and ``manage.py rotate_secrets_key`` re-encrypts
what the old ones wrote. Unset, one key is derived from ``SECRET_KEY`` with HKDF; the
deploy check ``mirror.W002`` warns, as rotating ``SECRET_KEY`` would then lose them.

A stored value without the prefix is a clear one written before encryption (each app's
data migration encrypts them); it still reads, so a rolling upgrade keeps working.

:class:`EncryptedCharField` decrypts when the attribute is read, not when the row is
loaded: a page that lists endpoints never touches the key, and a value no key decrypts
raises :class:`SecretUndecryptable` only where it is used. cryptography is imported on first
use (a web worker starts without it, see tests/common/test_worker_start.py).
"""

from __future__ import annotations

import base64
import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import models, transaction
from django.db.models.query_utils import DeferredAttribute
from django.utils.datastructures import DictWrapper

if TYPE_CHECKING:
    from cryptography.fernet import Fernet, MultiFernet

PREFIX = "enc:v1:"
# Labels what the key derived from SECRET_KEY is for: no other use of SECRET_KEY yields it.
DERIVED_KEY_INFO = b"mirror secrets at rest, Fernet, v1"


class SecretUndecryptable(Exception):
    """A stored secret that no key of SECRETS_ENCRYPTION_KEYS decrypts (a key missing from
    the list, or SECRET_KEY changed while the key was derived from it)."""

    def __init__(self) -> None:
        super().__init__(
            "a stored secret cannot be decrypted with any key of SECRETS_ENCRYPTION_KEYS "
            "(or, when it is unset, the key derived from SECRET_KEY)"
        )


def keys_are_derived() -> bool:
    return not settings.SECRETS_ENCRYPTION_KEYS


def _derived_key(secret_key: str) -> bytes:
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    hkdf = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=DERIVED_KEY_INFO)
    return base64.urlsafe_b64encode(hkdf.derive(secret_key.encode()))


@functools.lru_cache(maxsize=4)
def _keys(configured: tuple[str, ...], secret_key: str) -> tuple[Fernet, MultiFernet]:
    """The first key (it encrypts) and all of them (they decrypt)."""
    from cryptography.fernet import Fernet, MultiFernet

    keys = [Fernet(key.encode()) for key in configured] or [Fernet(_derived_key(secret_key))]
    return keys[0], MultiFernet(keys)


def _current_keys() -> tuple[Fernet, MultiFernet]:
    return _keys(tuple(settings.SECRETS_ENCRYPTION_KEYS), settings.SECRET_KEY)


def is_encrypted(stored: str) -> bool:
    return stored.startswith(PREFIX)


def encrypt(clear: str) -> str:
    """``clear`` as stored; the empty string stays empty (no secret is not a secret)."""
    if not clear:
        return clear
    return PREFIX + _current_keys()[0].encrypt(clear.encode()).decode("ascii")


def encrypt_if_clear(stored: str) -> str:
    """A stored value encrypted, unless it already is (the data migrations' step)."""
    return stored if is_encrypted(stored) else encrypt(stored)


def decrypt(stored: str) -> str:
    """The clear value of a stored one (a clear legacy value is returned as it is)."""
    if not is_encrypted(stored):
        return stored
    from cryptography.fernet import InvalidToken

    try:
        return _current_keys()[1].decrypt(stored[len(PREFIX) :].encode("ascii")).decode()
    except (InvalidToken, UnicodeError):
        raise SecretUndecryptable() from None


def _under_first_key(stored: str) -> bool:
    """Whether ``stored`` is a token of the first key (the one that encrypts now)."""
    from cryptography.fernet import InvalidToken

    if not is_encrypted(stored):
        return False
    try:
        _current_keys()[0].decrypt(stored[len(PREFIX) :].encode("ascii"))
    except (InvalidToken, UnicodeError):
        return False
    return True


def reencrypt(stored: str) -> str:
    """``stored`` encrypted with the first key: as it is when it already is, else decrypted
    with whichever key does (or a clear legacy value as it is) and encrypted again."""
    return stored if _under_first_key(stored) else encrypt(decrypt(stored))


def stored_length(max_length: int) -> int:
    """The longest stored form of a value of ``max_length`` characters (each up to four
    bytes in UTF-8): the Fernet token is its padded ciphertext with a version byte, a
    timestamp, an IV and a MAC, in base64."""
    ciphertext = (4 * max_length // 16 + 1) * 16
    token = 1 + 8 + 16 + ciphertext + 32
    return len(PREFIX) + 4 * -(-token // 3)


class Sealed:
    """A secret as stored (``enc:v1:…`` or a clear legacy value), not yet decrypted."""

    __slots__ = ("stored",)

    def __init__(self, stored: str) -> None:
        self.stored = stored

    def __repr__(self) -> str:
        return "<Sealed secret>"  # never the token itself, in a log or a traceback


class _SecretAttribute(DeferredAttribute):
    """The field's attribute: holds what was loaded (:class:`Sealed`) or assigned (clear),
    and answers the clear value."""

    def __get__(self, instance: Any, cls: Any = None) -> Any:
        if instance is None:
            return self
        value = super().__get__(instance, cls)
        return decrypt(value.stored) if isinstance(value, Sealed) else value

    def __set__(self, instance: Any, value: Any) -> None:
        instance.__dict__[self.field.attname] = value


def sealed(instance: models.Model, attname: str) -> Sealed:
    """``instance``'s secret as stored, to move it to another field without decrypting it
    (a rotation keeps working when an old secret can no longer be read)."""
    value = instance.__dict__[attname]
    return value if isinstance(value, Sealed) else Sealed(encrypt(value))


class EncryptedCharField(models.CharField):  # type: ignore[type-arg]
    """A secret encrypted at rest. ``max_length`` is the clear value's (validated as any
    CharField's); the column is long enough for its token (:func:`stored_length`).

    Lookups on it cannot match (each encryption differs): secrets are read, not searched."""

    descriptor_class = _SecretAttribute

    def db_type_parameters(self, connection: Any) -> DictWrapper[Any]:
        assert self.max_length is not None
        column = {**self.__dict__, "max_length": stored_length(self.max_length)}
        return DictWrapper(column, connection.ops.quote_name, "qn_")

    def from_db_value(self, value: str | None, expression: Any, connection: Any) -> Sealed | None:
        return None if value is None else Sealed(value)

    def pre_save(self, model_instance: models.Model, add: bool) -> Any:
        # As held: a value loaded and not changed is written back as it was, undecrypted.
        return model_instance.__dict__[self.attname]

    def get_prep_value(self, value: Any) -> Any:
        if value is None:
            return None
        if isinstance(value, Sealed):
            stored = value.stored
            return stored if not stored or is_encrypted(stored) else encrypt(stored)
        return encrypt(str(value))


def rewrite_stored(
    model: type[models.Model],
    fields: Sequence[str],
    change: Callable[[str], str],
    *,
    batch_size: int,
) -> dict[str, int]:
    """Pass every stored value of ``fields`` through ``change``, a batch of rows at a time
    (read in primary key order and locked, so a rotation meanwhile is not overwritten);
    how many values were rewritten, kept, or could not be decrypted (left as they are).
    Reads through the model's base manager: the caller sets the org context (management
    commands and migrations see every org)."""
    counts = {"rewritten": 0, "kept": 0, "undecryptable": 0}
    last_pk: Any = None
    while True:
        with transaction.atomic():
            rows = model._base_manager.order_by("pk").select_for_update()
            if last_pk is not None:
                rows = rows.filter(pk__gt=last_pk)
            batch = list(rows.values_list("pk", *fields)[:batch_size])
            for pk, *values in batch:
                updates: dict[str, models.Value] = {}
                for name, value in zip(fields, values, strict=True):
                    if value is None or not value.stored:
                        continue
                    try:
                        new = change(value.stored)
                    except SecretUndecryptable:
                        counts["undecryptable"] += 1
                        continue
                    if new == value.stored:
                        counts["kept"] += 1
                    else:
                        # Written as it is (a Sealed or clear value would be encrypted).
                        updates[name] = models.Value(new, output_field=models.TextField())
                if updates:
                    model._base_manager.filter(pk=pk).update(**updates)
                    counts["rewritten"] += len(updates)
        if len(batch) < batch_size:
            return counts
        last_pk = batch[-1][0]


def encrypted_fields() -> dict[type[models.Model], list[str]]:
    """Every model's encrypted fields, found in the app registry (this app names none)."""
    from django.apps import apps

    found: dict[type[models.Model], list[str]] = {}
    for model in apps.get_models():
        names = [f.name for f in model._meta.concrete_fields if isinstance(f, EncryptedCharField)]
        if names:
            found[model] = names
    return found


def secrets_reencrypt(*, batch_size: int) -> dict[str, dict[str, int]]:
    """Every stored secret encrypted with the first key of SECRETS_ENCRYPTION_KEYS (after
    a new key was put first; clear legacy values too); per model (``app.model``), how many
    values were rewritten, already were, or no key decrypts."""
    return {
        model._meta.label_lower: rewrite_stored(model, names, reencrypt, batch_size=batch_size)
        for model, names in encrypted_fields().items()
    }
