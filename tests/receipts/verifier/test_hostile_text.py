"""Hostile receipt text, vector style: every case is a clean verdict, never an exception.

Once, three of these escaped the verifier as exceptions (a 500 on the push
routes): nesting in ``fields`` past the canonical serializer's limit (``TypeError``), past
the interpreter's recursion limit (``RecursionError``), and a typed integer of thousands of
digits (``ValueError`` from ``int()``). ``HOSTILE_CASES`` is shared with the browser
verifier's test (tests/console/test_verify_page_hostile.py), which must agree.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from apps.common.json_text import DEFAULT_MAX_DEPTH
from apps.receipts.verifier import DecodeError, parse_json, verify_receipt
from tests.receipts.factories import Agent

PREFIX = "input is not a well-formed action receipt: "
PLACEHOLDER = "\ue000placeholder\ue000"
# receipt → content → action → fields: the free-form value below sits at depth 5.
FIELDS_DEPTH = 4
LIMIT_IN_FIELDS = DEFAULT_MAX_DEPTH - FIELDS_DEPTH


def nested(levels: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(levels - 1):
        value = [value]
    return value


def with_fields(value: Any, *, agent: Agent | None = None) -> str:
    """A receipt signed over ``fields = {"v": value}``."""
    agent = agent or Agent()
    content = agent.content()
    content["action"]["fields"] = {"v": value}
    return json.dumps(agent.sign(content))


def raw_in_fields(literal: str) -> str:
    """A receipt whose ``fields.v`` is the raw JSON ``literal`` (not signed over it)."""
    return with_fields(PLACEHOLDER).replace(json.dumps(PLACEHOLDER), literal)


def raw_at_seq(literal: str) -> str:
    agent = Agent()
    receipt = agent.sign(agent.content(session_id="s", seq=0))
    return json.dumps(receipt).replace('"seq": 0', f'"seq": {literal}')


@dataclass(frozen=True)
class HostileCase:
    name: str
    text: Callable[[], str | bytes]
    kind: str
    detail: str | None = None  # after the decode prefix, for Malformed


HOSTILE_CASES = [
    HostileCase("depth 10,000 in fields", lambda: raw_in_fields("[" * 10_000 + "]" * 10_000),
                "Malformed", "nesting deeper than 128 arrays/objects"),
    HostileCase("depth 300 in fields", lambda: raw_in_fields("[" * 300 + "]" * 300),
                "Malformed", "nesting deeper than 128 arrays/objects"),
    HostileCase("one level past the limit", lambda: with_fields(nested(LIMIT_IN_FIELDS + 1)),
                "Malformed", "nesting deeper than 128 arrays/objects"),
    HostileCase("exactly at the limit", lambda: with_fields(nested(LIMIT_IN_FIELDS)),
                "Valid"),
    HostileCase("a 5,000-digit typed integer", lambda: raw_at_seq("1" * 5000),
                "Malformed", "receipt.content.seq: integer out of range"),
    HostileCase("2^64 as a typed integer", lambda: raw_at_seq(str(2**64)),
                "Malformed", "receipt.content.seq: integer out of range"),
    HostileCase("1e999999 in fields", lambda: raw_in_fields("1e999999"),
                "Malformed", "receipt.content.action.fields.v: number out of range"),
    HostileCase("a 5,000-digit integer in fields", lambda: raw_in_fields("-" + "9" * 5000),
                "Malformed", "receipt.content.action.fields.v: number out of range"),
    HostileCase("an escaped lone surrogate", lambda: raw_in_fields('"\\udfff"'),
                "Malformed", "lone surrogate in a string"),
    HostileCase("invalid UTF-8", lambda: raw_in_fields('"x"').encode().replace(b'"x"', b'"\xff"'),
                "Malformed", "input is not valid UTF-8"),
]  # fmt: skip


@pytest.mark.parametrize("case", HOSTILE_CASES, ids=[case.name for case in HOSTILE_CASES])
def test_hostile_text_gets_a_clean_verdict(case: HostileCase) -> None:
    verdict = verify_receipt(case.text())
    assert verdict.kind == case.kind, verdict.detail
    if case.detail is not None:
        assert verdict.stage == "decode"
        assert verdict.detail is not None
        assert verdict.detail.startswith(PREFIX + case.detail), verdict.detail


def test_parse_json_takes_the_route_s_depth_limit() -> None:
    with pytest.raises(DecodeError, match="nesting deeper than 3"):
        parse_json("[[[[]]]]", max_depth=3)
    assert parse_json("[[[]]]", max_depth=3) == [[[]]]
