"""Named refusals of policy deploys (keyscoped-profile.md, POST /v1/policy)."""

from __future__ import annotations

from http import HTTPStatus

from apps.common.errors import DomainError, NotFound


class PolicyParseRejected(DomainError):
    """The TOML or the rule model does not parse (422)."""

    status = HTTPStatus.UNPROCESSABLE_ENTITY
    code = "policy_parse_error"

    def body_extras(self) -> dict[str, object]:
        return {"result": "parse_error"}


class PolicyFloorBypass(DomainError):
    """A rule would let a dangerous verb run without a human (409)."""

    code = "policy_floor_bypass"

    def __init__(self, message: str, rule_id: str | None) -> None:
        super().__init__(message)
        self.rule_id = rule_id

    def body_extras(self) -> dict[str, object]:
        return {"result": "floor_bypass", "rule_id": self.rule_id}


class PolicyPinMismatch(DomainError):
    """``expected_policy_hash`` is no longer the active pin (409, optimistic concurrency)."""

    code = "policy_pin_mismatch"

    def __init__(self, message: str, active_policy_hash: str) -> None:
        super().__init__(message)
        self.active_policy_hash = active_policy_hash

    def body_extras(self) -> dict[str, object]:
        return {"active_policy_hash": self.active_policy_hash}


class PolicyNotFound(NotFound):
    code = "policy_not_found"


class PolicyProposalOpen(DomainError):
    """A proposal is refused while another one is open for the org (409)."""

    code = "policy_proposal_open"

    def __init__(self, message: str, open_policy_id: str) -> None:
        super().__init__(message)
        self.open_policy_id = open_policy_id

    def body_extras(self) -> dict[str, object]:
        return {"open_policy_id": self.open_policy_id}


class PolicyProposalClosed(DomainError):
    """A vote on a proposal that no longer takes votes (409)."""

    code = "policy_proposal_closed"


class PolicyProposalNotFound(NotFound):
    code = "policy_proposal_not_found"


class BreakGlassRefused(DomainError):
    """Break-glass needs a quorum to break and a written reason (422)."""

    status = HTTPStatus.UNPROCESSABLE_ENTITY
    teampath_status = HTTPStatus.BAD_REQUEST
    code = "break_glass_refused"


class PolicyReplayNotFound(NotFound):
    code = "policy_replay_not_found"
