"""Stored JSON text: written compact, read back to the same value."""

from __future__ import annotations

from apps.common.stored_json import stored_text, stored_value


def test_stored_text_is_compact_utf8_and_reads_back() -> None:
    value = {"action": {"verb": "send", "fields": {"to": "zoë"}}, "n": [1, 2.5, None, True]}
    text = stored_text(value)
    assert text == '{"action":{"verb":"send","fields":{"to":"zoë"}},"n":[1,2.5,null,true]}'
    assert stored_value(text) == value
    assert stored_value(text.encode()) == value
