from tests.approvals.conftest import approvers  # noqa: F401 (shared fixture)
