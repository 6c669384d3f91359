from apps.tenancy.models import Role


def test_roles_are_ordered_viewer_auditor_manager_owner():
    assert [role.value for role in Role] == ["viewer", "auditor", "manager", "owner"]
    assert Role.OWNER.at_least(Role.MANAGER)
    assert Role.MANAGER.at_least(Role.MANAGER)
    assert not Role.AUDITOR.at_least(Role.MANAGER)
    assert not Role.VIEWER.at_least(Role.AUDITOR)
