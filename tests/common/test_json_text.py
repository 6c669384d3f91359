"""The one strict JSON parser (apps.common.json_text and apps.common.json_body): its rules
and limits, value by value."""

from __future__ import annotations

import io
from typing import Any

import pytest
from rest_framework.exceptions import ParseError

from apps.api.parsers import StrictJsonParser
from apps.common.errors import InvalidInput, InvalidJson, PayloadTooLarge
from apps.common.json_body import (
    is_json_media_type,
    parse_json_body,
    raw_body_members,
)
from apps.common.json_text import (
    DEFAULT_MAX_DEPTH,
    INTEGER_MAX,
    INTEGER_MIN,
    JsonNumber,
    JsonObject,
    JsonTextError,
    parse_json_text,
    parse_plain_json,
)


def refusal(text: bytes | str, **options: Any) -> str:
    with pytest.raises(JsonTextError) as raised:
        parse_plain_json(text, **options)
    return str(raised.value)


class TestTextRules:
    def test_it_reads_plain_json(self):
        assert parse_plain_json(b'{"a":[1,2.5,"x",true,null,{"b":-3}]}') == {
            "a": [1, 2.5, "x", True, None, {"b": -3}]
        }

    @pytest.mark.parametrize(
        ("text", "reason"),
        [
            (b"\xff", "input is not valid UTF-8"),
            (b'"\xed\xa0\x80"', "input is not valid UTF-8"),
            (b"\xef\xbb\xbf{}", "a byte-order mark is not allowed"),
            (b'"\\ud800"', "lone surrogate in a string"),
            (b'{"\\udc00":1}', "lone surrogate in a member name"),
            (b"NaN", "NaN is not a JSON value"),
            (b"[-Infinity]", "-Infinity is not a JSON value"),
            (b"{} x", "Extra data"),
            (b"", "Expecting value"),
            (b'"a\x01"', "Invalid control character"),
        ],
    )
    def test_it_refuses_what_is_not_json_text(self, text, reason):
        assert reason in refusal(text)

    def test_a_surrogate_pair_is_one_character(self):
        assert parse_plain_json(b'"\\ud83d\\ude00"') == "\U0001f600"

    def test_depth_is_counted_in_nested_arrays_and_objects(self):
        assert DEFAULT_MAX_DEPTH == 128
        assert parse_plain_json("[" * 128 + "]" * 128) is not None
        nested = '{"a":' * 127 + "[]" + "}" * 127
        assert parse_plain_json(nested) is not None
        assert refusal("[" * 129 + "]" * 129) == "nesting deeper than 128 arrays/objects"
        assert refusal("[" * 3 + "]" * 3, max_depth=2) == "nesting deeper than 2 arrays/objects"

    def test_depth_is_the_deepest_branch_of_a_wide_body(self):
        # More brackets than the limit, so the tree is walked: only the deepest branch counts.
        wide = '{"a":[' + ",".join(['{"b":[1,{"c":"x"}]}'] * 200)
        assert parse_plain_json(wide + "]}") is not None
        deep = '{"d":' * 126 + "[[]]" + "}" * 126  # 128 levels, inside the body's array: 130
        assert refusal(wide + "," + deep + "]}") == "nesting deeper than 128 arrays/objects"
        shallower = '{"d":' * 124 + "[[]]" + "}" * 124  # 128 levels in all
        assert parse_plain_json(wide + "," + shallower + "]}") is not None

    def test_depth_ten_thousand_is_a_clean_refusal(self):
        assert refusal("[" * 10_000 + "]" * 10_000) == "nesting deeper than 128 arrays/objects"
        assert refusal('{"a":' * 10_000 + "1" + "}" * 10_000).startswith("nesting deeper")
        assert refusal("[" * 1_000_000).startswith("nesting deeper")

    def test_brackets_inside_strings_do_not_count(self):
        assert parse_plain_json('["' + "[" * 500 + '"]') == ["[" * 500]


class TestPlainRules:
    def test_a_repeated_member_name_is_refused_at_any_depth(self):
        assert refusal(b'{"a":1,"a":1}') == "$.a: repeated member name"
        assert refusal(b'{"x":[{"b":1,"b":2}]}') == "$.x[0].b: repeated member name"

    def test_nul_is_refused_in_names_and_strings(self):
        assert refusal(b'{"a":"x\\u0000"}') == "$.a: U+0000 (NUL) is not allowed in a string"
        assert refusal(b'{"a\\u0000":1}') == "$: U+0000 (NUL) is not allowed in a member name"
        assert "NUL" in refusal(b'["\\u0000"]')
        # An escaped backslash followed by "u0000" is six characters, not a NUL.
        assert parse_plain_json(b'"\\\\u0000"') == "\\u0000"

    @pytest.mark.parametrize("number", [INTEGER_MIN, -1, 0, 2**53 + 1, INTEGER_MAX])
    def test_integers_in_range_are_exact(self, number):
        assert parse_plain_json(str(number)) == number

    @pytest.mark.parametrize(
        "text", [str(INTEGER_MIN - 1), str(INTEGER_MAX + 1), "1" * 5000, "-" + "9" * 5000]
    )
    def test_integers_out_of_range_are_refused_before_they_are_read(self, text):
        assert "integer outside" in refusal(text)

    def test_other_numbers_must_be_finite_doubles(self):
        assert parse_plain_json("1e308") == 1e308
        assert parse_plain_json("1E-400") == 0.0
        for text in ("1e309", "-1e999999", "1" * 400 + ".5"):
            assert refusal(text) == "$: number too large for a double"

    def test_the_receipt_reading_keeps_what_the_verifier_judges(self):
        value = parse_json_text(b'{"a":"\\u0000","a":1e999999}')
        assert value == JsonObject([("a", "\0"), ("a", JsonNumber("1e999999"))])


class TestBodies:
    @pytest.mark.parametrize(
        ("content_type", "json"),
        [
            ("application/json", True),
            ("application/json; charset=utf-8", True),
            ("Application/JSON", True),
            ("application/vnd.api+json", True),
            ("application/merge-patch+json; charset=utf-8", True),
            ("+json", False),
            ("text/plain", False),
            ("application/jsonx", False),
            ("", False),
            (None, False),
        ],
    )
    def test_json_media_types(self, content_type, json):
        assert is_json_media_type(content_type) is json

    def test_a_plain_body_refusal_is_invalid_json(self):
        with pytest.raises(InvalidJson, match=r"invalid JSON body: .*repeated"):
            parse_json_body(b'{"a":1,"a":2}')

    def test_a_member_of_a_raw_body_is_held_to_the_plain_rules(self):
        assert raw_body_members(b'{"routingHint":"oncall"}')["routingHint"] == "oncall"
        with pytest.raises(InvalidInput, match=r"\$\.routingHint: U\+0000"):
            raw_body_members(b'{"routingHint":"on\\u0000call"}')
        with pytest.raises(InvalidInput, match="member name"):
            raw_body_members(b'{"x\\u0000":1}')
        with pytest.raises(InvalidInput, match="integer outside"):
            raw_body_members(b'{"n":' + b"1" * 5000 + b"}")


class _Request:
    def __init__(self, length: int) -> None:
        self.META = {"CONTENT_LENGTH": str(length)}


class TestStrictJsonParser:
    def parse(self, body: bytes, declared: int | None = None) -> Any:
        context = {"request": _Request(len(body) if declared is None else declared)}
        return StrictJsonParser().parse(io.BytesIO(body), "application/json", context)

    def test_it_parses_a_plain_body(self):
        assert self.parse(b'{"a": 1}') == {"a": 1}

    def test_a_declared_length_over_the_limit_is_refused_before_reading(self, settings):
        settings.JSON_BODY_MAX_BYTES = 1024
        with pytest.raises(PayloadTooLarge, match="larger than 1024 bytes"):
            self.parse(b"{}", declared=1025)

    def test_more_bytes_than_the_limit_are_refused_after_reading(self, settings):
        settings.JSON_BODY_MAX_BYTES = 1024
        with pytest.raises(PayloadTooLarge):
            self.parse(b'{"a":"' + b"x" * 2000 + b'"}', declared=10)

    def test_a_refusal_of_the_text_is_a_parse_error(self):
        with pytest.raises(ParseError, match="nesting deeper than 128"):
            self.parse(b"[" * 10_000 + b"]" * 10_000)
        with pytest.raises(ParseError, match="repeated member name"):
            self.parse(b'{"a":1,"a":2}')
