"""Org-head leaves, checkpoints and ``cosignature/v1`` (transparency.md §1, §3.2, §4).

Strings here are Python ``str``; a note is UTF-8 on the wire. Nothing in this module signs
except :func:`cosign`, which only a witness calls, with its own key.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
import struct
import unicodedata
from dataclasses import dataclass

from nacl.bindings import crypto_sign_open
from nacl.exceptions import BadSignatureError, CryptoError
from nacl.signing import SigningKey

ORG_HEAD_PREFIX = b"receipt-mirror-org-head/v1\x00"
ORG_ID_RE = re.compile(r"^olog_[a-z2-7]{26}\Z")
EM_DASH = "\u2014 "
COSIGNATURE_BYTES = 76
MAX_U64 = 2**64 - 1
MAX_TIMESTAMP = 2**63 - 1
_SIZE_RE = re.compile(r"^(0|[1-9][0-9]*)\Z")
_HEX8_RE = re.compile(r"^[0-9a-f]{8}\Z")
_HEX64_RE = re.compile(r"^[0-9a-f]{64}\Z")


class NoteError(ValueError):
    """A checkpoint, vkey or signature line that does not parse."""


def is_hex64(value: object) -> bool:
    return isinstance(value, str) and _HEX64_RE.match(value) is not None


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def b64decode_strict(text: str) -> bytes | None:
    """RFC 4648 §4 with padding, refused unless it re-encodes to the same text."""
    if not text.isascii():
        return None
    try:
        decoded = binascii.a2b_base64(text, strict_mode=True)
    except (binascii.Error, ValueError):
        return None
    if base64.b64encode(decoded).decode("ascii") != text:
        return None
    return decoded


def is_valid_key_name(name: str) -> bool:
    """A note key name (§4.3): non-empty, no Unicode whitespace, no ``+``."""
    return (
        bool(name)
        and "+" not in name
        and not any(ch.isspace() or unicodedata.category(ch) in ("Zs", "Zl", "Zp") for ch in name)
        and not any(unicodedata.category(ch) == "Cc" for ch in name)
    )


def is_valid_origin(origin: str) -> bool:
    """§1: non-empty, at most 255 bytes of UTF-8, no whitespace, no ``+``, no control."""
    return is_valid_key_name(origin) and len(origin.encode("utf-8")) <= 255


# -- org heads ---------------------------------------------------------------------------


def org_head_leaf(org_id: str, org_tree_size: int, org_root: bytes) -> bytes:
    name = org_id.encode("utf-8")
    return (
        ORG_HEAD_PREFIX
        + struct.pack("<Q", len(name))
        + name
        + struct.pack("<Q", org_tree_size)
        + org_root
    )


def parse_org_head_leaf(leaf: bytes) -> tuple[str, int, bytes]:
    """``(org_id, org_tree_size, org_root)`` of an org-head leaf; NoteError if malformed."""
    if not leaf.startswith(ORG_HEAD_PREFIX) or len(leaf) < len(ORG_HEAD_PREFIX) + 8:
        raise NoteError("not an org-head leaf")
    at = len(ORG_HEAD_PREFIX)
    (length,) = struct.unpack("<Q", leaf[at : at + 8])
    at += 8
    if len(leaf) != at + length + 8 + 32:
        raise NoteError("org-head leaf of the wrong length")
    try:
        org_id = leaf[at : at + length].decode("utf-8")
    except UnicodeDecodeError as error:
        raise NoteError("org_id not UTF-8") from error
    at += length
    (size,) = struct.unpack("<Q", leaf[at : at + 8])
    return org_id, size, leaf[at + 8 :]


# -- checkpoints -------------------------------------------------------------------------


def checkpoint_body(origin: str, size: int, root: bytes) -> str:
    return f"{origin}\n{size}\n{b64(root)}\n"


def checkpoint_note(body: str, signature_lines: list[str]) -> str:
    """§4.2: the body, a blank line, then one LF-terminated line per cosignature."""
    return body + "\n" + "".join(line + "\n" for line in signature_lines)


@dataclass(frozen=True)
class SignatureLine:
    name: str
    signature: bytes  # the decoded b64
    text: str  # the line without its LF

    @property
    def encoded(self) -> str:
        return self.text.split(" ", 2)[2]


@dataclass(frozen=True)
class Checkpoint:
    origin: str
    size: int
    root: bytes
    body: str
    lines: tuple[SignatureLine, ...]


def parse_signature_line(line: str, *, min_bytes: int = 5) -> SignatureLine:
    """``"— " name " " b64``; NoteError otherwise."""
    if not line.startswith(EM_DASH):
        raise NoteError("a signature line starts with an em dash and a space")
    name, space, encoded = line[len(EM_DASH) :].partition(" ")
    if not space or not is_valid_key_name(name):
        raise NoteError("bad key name in a signature line")
    signature = b64decode_strict(encoded)
    if signature is None or len(signature) < min_bytes:
        raise NoteError("bad signature in a signature line")
    return SignatureLine(name=name, signature=signature, text=line)


def parse_checkpoint(note: str | bytes) -> Checkpoint:
    """§4.3: a served checkpoint note, or NoteError (``bad_checkpoint``)."""
    if isinstance(note, bytes):
        try:
            note = note.decode("utf-8")
        except UnicodeDecodeError as error:
            raise NoteError("not UTF-8") from error
    if any(unicodedata.category(ch) == "Cc" and ch != "\n" for ch in note):
        raise NoteError("control character in the note")
    if any(0xD800 <= ord(ch) <= 0xDFFF for ch in note):
        raise NoteError("not UTF-8")
    head, separator, block = note.partition("\n\n")
    if not separator:
        raise NoteError("no blank line after the body")
    lines = head.split("\n")
    if len(lines) != 3:
        raise NoteError("the body is not three lines")
    origin, size_text, root_text = lines
    if not origin:
        raise NoteError("empty origin")
    if not _SIZE_RE.match(size_text) or int(size_text) > MAX_U64:
        raise NoteError("bad tree size")
    root = b64decode_strict(root_text)
    if root is None or len(root) != 32:
        raise NoteError("bad root hash")
    signatures: list[SignatureLine] = []
    if block:
        if not block.endswith("\n"):
            raise NoteError("the signature block does not end with LF")
        for line in block[:-1].split("\n"):
            signatures.append(parse_signature_line(line))
    return Checkpoint(
        origin=origin,
        size=int(size_text),
        root=root,
        body=head + "\n",
        lines=tuple(signatures),
    )


# -- witness keys and cosignature/v1 -----------------------------------------------------


def key_id(name: str, public_key: bytes) -> bytes:
    return hashlib.sha256(name.encode("utf-8") + b"\n\x04" + public_key).digest()[:4]


def vkey_of(name: str, public_key: bytes) -> str:
    encoded = b64(b"\x04" + public_key)
    return f"{name}+{key_id(name, public_key).hex()}+{encoded}"


@dataclass(frozen=True)
class WitnessKey:
    name: str
    public_key: bytes
    key_id: bytes

    @property
    def vkey(self) -> str:
        return vkey_of(self.name, self.public_key)


def parse_vkey(vkey: str) -> WitnessKey:
    """A type-0x04 (cosignature/v1) vkey whose key ID is right; NoteError otherwise."""
    if not isinstance(vkey, str):
        raise NoteError("a vkey is a string")
    # The name has no '+'; the b64 key may.
    name, _, rest = vkey.partition("+")
    hex_id, separator, encoded = rest.partition("+")
    if not separator:
        raise NoteError("a vkey is name+keyid+key")
    if not is_valid_key_name(name):
        raise NoteError("bad key name")
    if not _HEX8_RE.match(hex_id):
        raise NoteError("the key ID is 8 lowercase hex digits")
    key = b64decode_strict(encoded)
    if key is None or len(key) != 33:
        raise NoteError("the key is b64 of 33 bytes")
    if key[0] != 0x04:
        raise NoteError("not a cosignature/v1 (type 0x04) key")
    public_key = key[1:]
    if key_id(name, public_key).hex() != hex_id:
        raise NoteError("the key ID does not match the name and key")
    return WitnessKey(name=name, public_key=public_key, key_id=bytes.fromhex(hex_id))


def cosignature_message(body: str, timestamp: int) -> bytes:
    return f"cosignature/v1\ntime {timestamp}\n".encode() + body.encode("utf-8")


def cosign(seed: bytes, name: str, timestamp: int, body: str) -> str:
    """A witness's signature line over ``body`` (§4.4). The log itself never calls this."""
    signing_key = SigningKey(seed)
    public_key = bytes(signing_key.verify_key)
    signature = signing_key.sign(cosignature_message(body, timestamp)).signature
    payload = key_id(name, public_key) + struct.pack(">Q", timestamp) + signature
    return f"{EM_DASH}{name} {b64(payload)}"


@dataclass(frozen=True)
class Cosignature:
    name: str
    key_id: bytes
    timestamp: int
    signature: bytes
    line: str


def parse_cosignature_line(line: str) -> Cosignature:
    """A line shaped as a cosignature (76 decoded bytes); says nothing of its validity."""
    if line.endswith("\n"):
        line = line[:-1]
    parsed = parse_signature_line(line, min_bytes=COSIGNATURE_BYTES)
    if len(parsed.signature) != COSIGNATURE_BYTES:
        raise NoteError("a cosignature is 76 bytes")
    data = parsed.signature
    (timestamp,) = struct.unpack(">Q", data[4:12])
    return Cosignature(
        name=parsed.name, key_id=data[:4], timestamp=timestamp, signature=data[12:], line=line
    )


def ed25519_verifies(public_key: bytes, signature: bytes, message: bytes) -> bool:
    """Strict Ed25519 (libsodium, as receipts.md §7)."""
    if len(public_key) != 32 or len(signature) != 64:
        return False
    try:
        crypto_sign_open(signature + message, public_key)
    except (BadSignatureError, CryptoError, ValueError):
        return False
    return True


def cosignature_verifies(key: WitnessKey, cosignature: Cosignature, body: str) -> bool:
    """§4.4: the line is this key's and its signature verifies over ``body``."""
    return (
        cosignature.name == key.name
        and cosignature.key_id == key.key_id
        and cosignature.timestamp <= MAX_TIMESTAMP
        and ed25519_verifies(
            key.public_key, cosignature.signature, cosignature_message(body, cosignature.timestamp)
        )
    )


def verify_cosignature_line(vkey: str, body: str, line: str) -> bool:
    """The ``verify_cosignature`` op (§9): whether ``line`` verifies for ``vkey`` over ``body``."""
    try:
        key = parse_vkey(vkey)
        cosignature = parse_cosignature_line(line)
    except NoteError:
        return False
    return cosignature_verifies(key, cosignature, body)
