from tests.approvals.conftest import approvers, sdk_client  # noqa: F401 (shared fixtures)
