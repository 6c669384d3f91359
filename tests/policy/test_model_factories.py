"""The policy factory builds versions the model and policy_deploy agree with."""

from __future__ import annotations

import pytest

from apps.policy.models import PolicyHead, PolicyVersion
from apps.policy.selectors import policy_active
from apps.policy.services import policy_deploy
from tests.policy.model_factories import PolicyVersionFactory
from tests.policy.test_policy_api import BLOCK_SEARCH

pytestmark = pytest.mark.django_db


def test_a_version_is_clean_and_stored_without_being_activated(cast) -> None:
    version = PolicyVersionFactory(org=cast.acme)
    version.full_clean()
    assert version.rule_count == 1
    assert not PolicyHead.objects.filter(org=cast.acme, version=version).exists()
    assert policy_active(org=cast.acme).is_fail_safe


@pytest.mark.parametrize("toml", ["", BLOCK_SEARCH], ids=["empty", "one-rule"])
def test_deploying_its_text_finds_the_same_version(cast, toml) -> None:
    version = PolicyVersionFactory(org=cast.acme, toml=toml)
    deployed = policy_deploy(org=cast.acme, toml=toml).version
    assert deployed == version
    assert (deployed.policy_id, deployed.policy_hash, deployed.rule_count) == (
        version.policy_id,
        version.policy_hash,
        version.rule_count,
    )


def test_the_same_text_is_the_same_version(cast) -> None:
    assert PolicyVersionFactory(org=cast.acme) == PolicyVersionFactory(org=cast.acme)
    assert PolicyVersion.objects.filter(org=cast.acme).count() == 1
