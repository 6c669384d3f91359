"""JSON text the service wrote itself and stored (a mirrored receipt's text, an approval's
suspended content): read back and written with orjson, without the strict text rules.

Text from outside goes through the strict rules once, on its way in (the entry points by
purpose are listed in ``apps.common.json_text``); what was stored after passing them is
read back here.
"""

from __future__ import annotations

from typing import Any

import orjson


def stored_value(text: str | bytes) -> Any:
    """The value of JSON text this service stored."""
    return orjson.loads(text)


def stored_text(value: Any) -> str:
    """``value`` as compact JSON text to store (UTF-8, no whitespace)."""
    return orjson.dumps(value).decode()
