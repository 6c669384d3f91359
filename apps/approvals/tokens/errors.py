"""The exceptions of the token package, each mapped to the reference's class name.

``reference_name`` is the name the heso 0.5.1 wheel raises for the same failure, so the
vector tests (and logs) can compare outcomes without depending on our Python class names.
"""

from __future__ import annotations

from typing import ClassVar


class ApprovalTokenError(Exception):
    """An approval token was refused (approvals.md §3). ``str()`` is the reference message."""

    reference_name: ClassVar[str] = "HesoApprovalTokenError"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ApprovalTokenMalformed(ApprovalTokenError):
    reference_name = "HesoApprovalTokenMalformed"


class ApprovalTokenInvalidDecision(ApprovalTokenMalformed):
    reference_name = "HesoApprovalTokenInvalidDecision"


class ApprovalTokenUnregisteredKey(ApprovalTokenError):
    reference_name = "HesoApprovalTokenUnregisteredKey"


class ApprovalTokenInvalidSignature(ApprovalTokenError):
    reference_name = "HesoApprovalTokenInvalidSignature"


class ApprovalTokenExpired(ApprovalTokenError):
    reference_name = "HesoApprovalTokenExpired"


class ApprovalTokenReplayedNonce(ApprovalTokenError):
    reference_name = "HesoApprovalTokenReplayedNonce"


class ApprovalTokenOutOfScope(ApprovalTokenError):
    reference_name = "HesoApprovalTokenOutOfScope"


class ApprovalTokenOutOfDecision(ApprovalTokenError):
    reference_name = "HesoApprovalTokenOutOfDecision"


class CosignError(Exception):
    """A co-sign payload or an assembly was refused (approvals.md §5-§7).

    ``str()`` is the reference message: ``"<function>: <text>"`` for the payload builders,
    ``"[<Code>] <text>"`` for assembly, where ``code`` holds ``<Code>``.
    """

    reference_name: ClassVar[str] = "HesoError"

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


class OperatorKeyMismatch(CosignError):
    """The operator key is not the key the suspended body names (§7.1 step 2).

    The SDK reacts to this one specifically: the approval must be re-opened under the new key.
    """

    reference_name = "HesoOperatorKeyMismatch"


class LegRejected(Exception):
    """A submitted co-signature leg the server must not store (approvals.md §8.1).

    ``code`` is a stable machine-readable token, ``reason`` a sentence for the client.
    """

    def __init__(self, code: str, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason
