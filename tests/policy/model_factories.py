"""Model factories for policy rows, beside the service-built cast (tests/conftest.py).

``PolicyVersionFactory(org=cast.acme)`` stores a version the way ``policy_deploy`` derives
it (hash, id and rule count from the TOML text) without activating it: no ``PolicyHead``
pin, no deployment history. Deploy through ``policy_deploy`` when the test is about what
is active; use the factory for a stored version, or for a write made around the service.
"""

from __future__ import annotations

import factory
from factory.django import DjangoModelFactory

from apps.policy.models import PolicyVersion
from apps.policy.rules import policy_hash, policy_id_for_hash
from apps.policy.services import policy_validate

ALLOW_SEARCH = (
    '[[rule]]\nid = "search.allow"\norder = 10\nenabled = true\nsubject = { kind = "any" }\n'
    'verb = "tool_call"\nscope = "*"\ndecision = "allow"\n'
)


class PolicyVersionFactory(DjangoModelFactory):
    """Pass ``org``; ``toml`` defaults to one rule allowing every tool call."""

    class Meta:
        model = PolicyVersion
        # A version is identified by its text, as policy_deploy's get_or_create does.
        django_get_or_create = ("org", "policy_hash")

    toml = ALLOW_SEARCH
    policy_hash = factory.LazyAttribute(lambda version: policy_hash(version.toml))
    policy_id = factory.LazyAttribute(lambda version: policy_id_for_hash(version.policy_hash))
    rule_count = factory.LazyAttribute(
        lambda version: len(policy_validate(toml=version.toml).rules)
    )
