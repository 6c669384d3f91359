"""policy.md §7: hash and id of the TOML text exactly as deployed."""

from __future__ import annotations

from apps.policy.rules import EMPTY_POLICY_TOML, load_policy, policy_hash, policy_id
from apps.policy.rules.identity import policy_id_for_hash
from tests.policy.rules.builders import rule

EMPTY_HASH = "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262"


def test_the_empty_policy_is_the_empty_string_and_loads_with_no_rules():
    assert EMPTY_POLICY_TOML == ""
    loaded = load_policy(EMPTY_POLICY_TOML)
    assert loaded.policy is not None
    assert loaded.policy.rules == ()


def test_the_empty_policy_has_the_documented_hash_and_id():
    assert policy_hash(EMPTY_POLICY_TOML) == EMPTY_HASH
    assert policy_id(EMPTY_POLICY_TOML) == "pol_af1349b9f5f9a1a6a0404dea"


def test_the_id_is_the_prefix_and_the_first_24_hex_characters_of_the_hash():
    toml_text = rule()
    assert policy_id(toml_text) == policy_id_for_hash(policy_hash(toml_text))
    assert len(policy_id(toml_text)) == len("pol_") + 24


def test_nothing_is_normalised_before_hashing():
    base = rule()
    variants = {base, base.replace("\n", "\r\n"), "\ufeff" + base, base + " ", base.rstrip("\n")}
    assert len({policy_hash(text) for text in variants}) == len(variants)
    assert all(load_policy(text).result == "ok" for text in variants)
