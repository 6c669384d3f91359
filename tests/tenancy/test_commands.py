import json
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError

from apps.tenancy.models import ApiKey, Membership, Org
from apps.tenancy.services import api_key_authenticate

pytestmark = pytest.mark.django_db


def run(*args: str) -> list[str]:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue().splitlines()


def test_create_org_prints_the_org_as_json():
    lines = run("create_org", "initech", "--name", "Initech", "--plan", "team")
    assert json.loads(lines[-1]) == {"slug": "initech", "name": "Initech", "plan": "team"}
    assert Org.objects.get(slug="initech").plan == "team"


def test_create_org_refuses_a_taken_slug(cast):
    with pytest.raises(CommandError, match="already exists"):
        run("create_org", "acme")


def test_issue_api_key_prints_the_secret_alone_on_the_last_line(cast):
    lines = run("issue_api_key", "acme", "--scopes", "receipts:write,policy:read", "--label", "ci")
    secret = lines[-1]
    described = json.loads(lines[-2])
    assert secret.startswith(described["prefix"])
    assert described["scopes"] == ["policy:read", "receipts:write"]
    key = api_key_authenticate(presented=secret)
    assert key is not None
    assert key.org.slug == "acme"
    assert key.label == "ci"


def test_issue_api_key_refuses_an_unknown_org_and_an_unknown_scope(cast):
    with pytest.raises(CommandError, match="no org"):
        run("issue_api_key", "nobody", "--scopes", "receipts:write")
    with pytest.raises(CommandError, match="unknown scope"):
        run("issue_api_key", "acme", "--scopes", "receipts:write,admin")


def test_list_api_keys_prints_one_json_object_per_key_and_no_secret(cast):
    lines = run("list_api_keys", "acme")
    listed = [json.loads(line) for line in lines]
    assert {item["prefix"] for item in listed} == set(
        ApiKey.objects.filter(org=cast.acme).values_list("prefix", flat=True)
    )
    assert set(listed[0]) == {"prefix", "label", "scopes", "revoked", "created"}
    assert cast.acme_key.secret not in "\n".join(lines)


def test_revoke_api_key_revokes_by_prefix(cast):
    prefix = cast.acme_key.api_key.prefix
    assert json.loads(run("revoke_api_key", prefix)[-1]) == {"prefix": prefix, "revoked": True}
    listed = {json.loads(line)["prefix"]: json.loads(line) for line in run("list_api_keys", "acme")}
    assert listed[prefix]["revoked"] is True
    assert api_key_authenticate(presented=cast.acme_key.secret) is None


def test_revoke_api_key_fails_on_an_unknown_prefix(cast):
    with pytest.raises(CommandError, match="no API key"):
        run("revoke_api_key", "hk_ffffffffffff")


def test_add_member_creates_the_user_and_sets_the_role(cast):
    line = run("add_member", "globex", "gina", "--role", "auditor", "--password", "s3cret-pw")
    assert json.loads(line[-1]) == {"org": "globex", "username": "gina", "role": "auditor"}
    user = get_user_model().objects.get(username="gina")
    assert user.check_password("s3cret-pw")
    assert user.is_staff


def test_add_member_changes_an_existing_role(cast):
    run("add_member", "acme", "acme-viewer", "--role", "manager")
    membership = Membership.objects.get(user__username="acme-viewer", org=cast.acme)
    assert membership.role == "manager"
    assert Membership.objects.filter(user__username="acme-viewer").count() == 1
