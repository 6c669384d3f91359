"""``TeamPathClient``: the team-path routes over ``urllib``, errors as ``TeamPathError``.

Every non-2xx answer raises :class:`TeamPathError` carrying the status, the ``error`` code,
the ``message``, the decoded body and any ``Retry-After``; its text holds the HTTP status,
the status text and the body, as the profile's client contract asks. A refused receipt on
``push_receipt`` (400/409/422/429) therefore raises too; its ``body`` holds the
``OutboxPushResult`` members. In a batch, refusals are results, never exceptions.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from http import HTTPStatus
from typing import Any

Receipt = dict[str, Any] | str | bytes
"""A receipt as a JSON object, or as JSON text sent byte for byte (signatures cover the
parsed content, so text from the SDK's ledger is best sent unchanged)."""


class TeamPathError(Exception):
    """A non-2xx answer of the team-path API (or an unreadable one)."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        reason: str = "",
        body: Any = None,
        retry_after: int | None = None,
    ) -> None:
        self.status = status
        self.code = code
        self.message = message
        self.reason = reason or _status_text(status)
        self.body = body
        self.retry_after = retry_after
        shown = json.dumps(body, ensure_ascii=False) if body is not None else message
        super().__init__(f"HTTP {status} {self.reason}: {shown}")


def _status_text(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""


def _receipt_text(receipt: Receipt) -> str:
    if isinstance(receipt, bytes):
        return receipt.decode("utf-8")
    if isinstance(receipt, str):
        return receipt
    return json.dumps(receipt, ensure_ascii=False, separators=(",", ":"))


class TeamPathClient:
    """One team's view of a team-path deployment, authenticated by one API key."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        team_id: str,
        *,
        timeout: float = 30.0,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.team_id = team_id
        self.timeout = timeout
        self._sleep = sleep
        self._clock = clock

    # --- routes -------------------------------------------------------------------------

    def fetch_policy(self) -> dict[str, Any]:
        """``PolicyBundle {version, rules, fetchedAt}`` of this client's team."""
        team = urllib.parse.quote(self.team_id, safe="")
        result: dict[str, Any] = self._request("GET", f"/v1/teams/{team}/policy")
        return result

    def push_receipt(self, receipt: Receipt) -> dict[str, Any]:
        """``OutboxPushResult`` of one receipt (201 stored, 200 already stored)."""
        result: dict[str, Any] = self._request("POST", "/v1/receipts", _receipt_text(receipt))
        return result

    def push_batch(self, receipts: Sequence[Receipt]) -> list[dict[str, Any]]:
        """One ``OutboxPushResult`` per receipt, in order; refusals are results."""
        body = '{"receipts":[' + ",".join(_receipt_text(r) for r in receipts) + "]}"
        results: list[dict[str, Any]] = self._request("POST", "/v1/receipts/batch", body)
        return results

    def open_approval(self, receipt: Receipt, routing_hint: str | None = None) -> dict[str, Any]:
        """``OpenApprovalResult {approvalId, token?, expiresAt}``."""
        body = '{"receipt":' + _receipt_text(receipt)
        if routing_hint is not None:
            body += ',"routingHint":' + json.dumps(routing_hint, ensure_ascii=False)
        result: dict[str, Any] = self._request("POST", "/v1/approvals", body + "}")
        return result

    def poll_approval(self, approval_id: str) -> dict[str, Any]:
        """``PollApprovalResult {outcome, approval?}``."""
        result: dict[str, Any] = self._request("GET", f"/v1/approvals/{self._id(approval_id)}")
        return result

    def submit_token(self, approval_id: str, token_b64: str) -> dict[str, Any]:
        """Settle an approval with the approver's signed token; the settled ``Approval``."""
        body = json.dumps({"token": token_b64})
        path = f"/v1/approvals/{self._id(approval_id)}/token"
        result: dict[str, Any] = self._request("POST", path, body)
        return result

    def wait_for_approval(
        self, approval_id: str, interval: float = 2.0, timeout: float = 300.0
    ) -> dict[str, Any]:
        """Poll until the outcome is no longer ``pending``; ``TimeoutError`` after
        ``timeout`` seconds. Answers 429/503 are waited out (``Retry-After``), not raised."""
        deadline = self._clock() + timeout
        while True:
            try:
                result = self.poll_approval(approval_id)
            except TeamPathError as error:
                if error.status not in (429, 503):
                    raise
                pause = float(error.retry_after or interval)
            else:
                if result.get("outcome") != "pending":
                    return result
                pause = interval
            remaining = deadline - self._clock()
            if remaining <= 0:
                raise TimeoutError(f"approval {approval_id} still pending after {timeout}s")
            self._sleep(min(pause, remaining))

    # --- transport ----------------------------------------------------------------------

    @staticmethod
    def _id(value: str) -> str:
        return urllib.parse.quote(value, safe="")

    def _request(self, method: str, path: str, body: str | None = None) -> Any:
        headers = {"Authorization": f"Bearer {self.api_key}", "Accept": "application/json"}
        data = None
        if body is not None:
            data = body.encode("utf-8")
            headers["Content-Type"] = "application/json"
        request = urllib.request.Request(  # noqa: S310 (the base URL is the caller's)
            self.base_url + path, data=data, headers=headers, method=method
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:  # noqa: S310
                return json.loads(response.read() or b"null")
        except urllib.error.HTTPError as answer:
            raise self._error(answer) from None

    @staticmethod
    def _error(answer: urllib.error.HTTPError) -> TeamPathError:
        raw = answer.read()
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        code, message = "", ""
        if isinstance(body, dict):
            code = str(body.get("error", ""))
            message = str(body.get("message", ""))
        elif isinstance(body, str):
            message = body
        retry_after = answer.headers.get("Retry-After")
        return TeamPathError(
            answer.code,
            code,
            message,
            reason=str(answer.reason or ""),
            body=body,
            retry_after=int(retry_after) if retry_after and retry_after.isdigit() else None,
        )
