"""How the mirror's lookup columns hold a receipt's free-text values."""

from __future__ import annotations

from blake3 import blake3

# The mirror's lookup columns (workflow, agent_identity, rule_id, tool_name, session_id)
# hold at most this many characters; the receipt's own text keeps every value whole.
INDEXED_MAX_CHARS = 200
_INDEXED_PREFIX_CHARS = INDEXED_MAX_CHARS - 65  # then "…" and the 64-hex digest


def indexed_text(value: str) -> str:
    """``value`` as a lookup column stores it: whole when it fits, else its first 135
    characters, "…" and the BLAKE3 hex of the whole value, so two long values that share
    a prefix stay apart (session continuity compares them). Every push route stores and
    looks up through this one function, so a single push and a batch store the same row."""
    if len(value) <= INDEXED_MAX_CHARS:
        return value
    return value[:_INDEXED_PREFIX_CHARS] + "…" + blake3(value.encode()).hexdigest()
