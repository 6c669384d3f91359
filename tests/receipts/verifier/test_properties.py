"""Property tests: canonicalization paths agree, receipts round-trip, mutations never pass."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apps.receipts.verifier import canonicalize, parse_json, verify_receipt
from apps.receipts.verifier.canonical import canonicalize_slow
from tests.receipts.factories import Agent, as_text

AGENT = Agent(seed=bytes(range(32)))

text = st.text(st.characters(exclude_categories=["Cs"]), max_size=12)
scalars = st.none() | st.booleans() | text | st.integers(-(2**53) + 1, 2**53 - 1)
json_values = st.recursive(
    scalars | st.floats(allow_nan=False, allow_infinity=False),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(text, children, max_size=4),
    max_leaves=20,
)
fast_path_values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.text(st.characters(max_codepoint=0xFFFF, exclude_categories=["Cs"]), max_size=8),
            children,
            max_size=4,
        )
    ),
    max_leaves=20,
)
checks = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@checks
@given(fast_path_values)
def test_the_fast_path_is_byte_identical_to_the_full_canonicalizer(value):
    assert canonicalize(value) == canonicalize_slow(value)


@checks
@given(json_values)
def test_any_value_canonicalizes_like_the_full_canonicalizer(value):
    assert canonicalize(value) == canonicalize_slow(value)


@checks
@given(st.dictionaries(text.filter(bool), json_values, min_size=1, max_size=5))
def test_random_content_round_trips_through_sign_verify_and_store(fields):
    receipt = AGENT.receipt(action={**AGENT.content()["action"], "fields": fields})
    verdict = verify_receipt(as_text(receipt))
    assert verdict.is_valid, verdict.as_dict()
    stored = verdict.receipt.stored_text
    again = verify_receipt(stored)
    assert again.is_valid
    assert again.receipt.action_hash == receipt["content"]["action_hash"]
    assert again.receipt.stored_text == stored


BASE_TEXT = as_text(AGENT.receipt())


@checks
@given(st.integers(0, len(BASE_TEXT) - 1), st.characters(exclude_categories=["Cs"]))
def test_a_changed_character_never_crashes_and_only_verifies_if_nothing_changed(index, char):
    mutated = BASE_TEXT[:index] + char + BASE_TEXT[index + 1 :]
    verdict = verify_receipt(mutated)
    if verdict.is_valid:
        # Only a change that leaves the decoded receipt identical may still verify
        # (e.g. a space swapped for another insignificant whitespace).
        assert json.loads(mutated) == json.loads(BASE_TEXT)


@checks
@given(st.binary(max_size=300))
def test_random_bytes_never_crash_the_verifier(data):
    verdict = verify_receipt(data)
    assert not verdict.is_valid


@checks
@given(st.integers(0, len(BASE_TEXT)), st.integers(1, 40))
def test_a_deleted_span_never_verifies(start, length):
    mutated = BASE_TEXT[:start] + BASE_TEXT[start + length :]
    if mutated != BASE_TEXT:
        assert not verify_receipt(mutated).is_valid


@checks
@given(json_values)
def test_parsing_never_loses_a_repeated_name(value):
    encoded = json.dumps({"a": value, "b": 1})
    duplicated = encoded[:-1] + ', "b": 2}'
    pairs = parse_json(duplicated)
    assert [name for name, _ in pairs] == ["a", "b", "b"]


@given(st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=-_ \né"))
def test_canonical_base64_decoding_agrees_with_the_standard_library(text):
    import base64
    import binascii

    from apps.receipts.verifier import canonical_b64decode

    try:
        expected = base64.b64decode(text, validate=True)
        if base64.b64encode(expected).decode("ascii") != text:
            expected = None
    except (binascii.Error, ValueError):
        expected = None
    assert canonical_b64decode(text) == expected
