"""A small HTTP client of the public log routes, for the witness and monitor tools.

Standard library only: a witness or monitor runs beside the service, not inside it, and
trusts nothing it fetches until it has verified it.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# (method, url, JSON body or None) -> (status, body bytes)
Transport = Callable[[str, str, bytes | None], tuple[int, bytes]]


def urllib_transport(timeout: float = 10.0) -> Transport:
    def send(method: str, url: str, body: bytes | None) -> tuple[int, bytes]:
        if not url.startswith(("https://", "http://")):
            raise LogUnavailable(f"not an HTTP(S) URL: {url}")
        request = urllib.request.Request(url, data=body, method=method)  # noqa: S310
        if body is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310
                return response.status, response.read()
        except urllib.error.HTTPError as error:
            return error.code, error.read()

    return send


class LogUnavailable(Exception):
    """The log answered something other than what the route promises."""


@dataclass
class LogClient:
    base_url: str  # e.g. https://mirror.example.com (routes are under /v1/log)
    transport: Transport

    def _url(self, path: str) -> str:
        return self.base_url.rstrip("/") + path

    def _get_json(self, path: str) -> Any:
        status, body = self.transport("GET", self._url(path), None)
        if status != 200:
            raise LogUnavailable(f"GET {path}: {status} {body[:200]!r}")
        try:
            return json.loads(body)
        except ValueError as error:
            raise LogUnavailable(f"GET {path}: not JSON") from error

    def checkpoint(self) -> str | None:
        """The served note, or None before epoch 1."""
        status, body = self.transport("GET", self._url("/v1/log/checkpoint"), None)
        if status == 404:
            return None
        if status != 200:
            raise LogUnavailable(f"GET /v1/log/checkpoint: {status}")
        return body.decode("utf-8", errors="replace")

    def consistency(self, first: int, second: int) -> list[bytes]:
        answer = self._get_json(f"/v1/log/consistency?first={first}&second={second}")
        return [bytes.fromhex(value) for value in answer["proof"]]

    def org_consistency(self, org_id: str, first: int, second: int) -> dict[str, Any]:
        return self._get_json(f"/v1/log/orgs/{org_id}/consistency?first={first}&second={second}")  # type: ignore[no-any-return]

    def leaves(self, start: int, end: int) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        while start < end:
            answer = self._get_json(f"/v1/log/leaves?start={start}&end={end}")
            if answer["end"] <= start:
                raise LogUnavailable("the leaves route made no progress")
            found.extend(answer["leaves"])
            start = answer["end"]
        return found

    def submit_cosignature(self, size: int, line: str) -> tuple[int, Any]:
        body = json.dumps({"checkpoint_size": size, "cosignature": line}).encode()
        status, answer = self.transport("POST", self._url("/v1/log/cosignatures"), body)
        try:
            return status, json.loads(answer)
        except ValueError:
            return status, answer.decode("utf-8", errors="replace")
