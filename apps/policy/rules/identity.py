"""Policy hash and id (policy.md §7, server.md §7).

The hash is the BLAKE3 of the TOML's UTF-8 bytes exactly as deployed, the value the SDK
stamps on what it suspends under that policy. A deploy stores the text with its line endings
normalised to LF (``apps.policy.services.policy_text_normalize``), so the hash is that of
the served text; nothing else is normalised: a byte-order mark or a trailing blank change
it. The id is derived from the hash, so re-deploying the same text is idempotent and always
yields the same id.
"""

from __future__ import annotations

from blake3 import blake3

POLICY_ID_PREFIX = "pol_"
POLICY_ID_HASH_CHARS = 24


def policy_hash(toml_text: str) -> str:
    """Lowercase 64-hex BLAKE3 of the UTF-8 bytes (``UnicodeEncodeError`` on a lone
    surrogate, which :func:`~apps.policy.rules.load_policy` refuses anyway)."""
    return blake3(toml_text.encode("utf-8")).hexdigest()


def policy_id(toml_text: str) -> str:
    """``"pol_"`` + the first 24 hex characters of :func:`policy_hash`."""
    return policy_id_for_hash(policy_hash(toml_text))


def policy_id_for_hash(hash_hex: str) -> str:
    """The id of the policy whose hash is ``hash_hex`` (for a hash already stored)."""
    return POLICY_ID_PREFIX + hash_hex[:POLICY_ID_HASH_CHARS]
