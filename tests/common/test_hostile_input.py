"""Hostile input to every route of both profiles: always a 4xx in the error body of
what the path routes to, never a 500, never a log record at ERROR.

The routes are not listed by hand: each profile's root URL conf is walked, so a route added
later is sent the same corpus. Each request carries valid credentials for its route's plane
(read from the view's authentication classes), so the refusal comes from the input and not
from a missing credential:

* JSON routes (DRF views with a body method, the console's JSON endpoints): a valid body,
  then the corpus built from it: U+0000 in every member name and string, every number made
  huge, depth 10,000 (and one past ``JSON_BODY_MAX_DEPTH``), 10 MB, invalid UTF-8, lone
  surrogates, ``NaN``, repeated names, a byte-order mark, trailing data, empty, non-object
  JSON, wrong content types;
* every route (admin and console pages included): ``%00`` in each path parameter and in the
  path, in the query string, in a header; a 10 MB body.

Expected answers. Whole-body refusals are exact: 413 for the size; otherwise key-scoped 422
``{"detail"}``, team-path 400 ``{"error", "message"}``, the console's JSON endpoints 400
``{"error", "message"}``, pages a plain-text 400. A variant that changes one position of a
valid body may also be refused later for what the value means (a receipt whose signature no
longer covers its content: 409 / 422), so it is held to "a 4xx in the right body" — except
on routes without a receipt in the body, where the parser must refuse it. In a team-path
batch a receipt's own refusal is per position: 200 with that position ``accepted: false``.
"""

from __future__ import annotations

import copy
import json
import logging
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any
from urllib.parse import unquote

import pytest
from django.conf import settings as django_settings
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import Resolver404, URLPattern, URLResolver, get_resolver, resolve
from rest_framework.authentication import SessionAuthentication

from apps.api.authentication import ApiKeyAuthentication, ConsoleJwtAuthentication
from apps.approvals.models import Approval
from apps.approvals.services import approver_key_register
from apps.tenancy.console_tokens import console_tokens_issue
from apps.tenancy.models import Scope
from apps.tenancy.org_context import activate_default
from apps.tenancy.services import api_key_issue
from tests.approvals.conftest import Approver, suspended_receipt
from tests.receipts.factories import Agent

PROFILES = ("keyscoped", "teampath")
SCOPE = "payments.review"
JSON = "application/json"
TEN_MB = 10 * 1024 * 1024
DEPTH = 10_000
HUGE_NUMBERS = ("1e999999", "1" * 5000, "-" + "9" * 5000, "18446744073709551616")
# Routes whose body carries a receipt (or a receipt's content): a value changed inside it
# may be refused by the verifier rather than the parser.
RECEIPT_ROUTES = {
    ("keyscoped", "receipt-push"),
    ("keyscoped", "approval-submit-token"),
    ("teampath", "receipt-push"),
    ("teampath", "receipt-push-batch"),
    ("teampath", "approval-open"),
}
BODY_METHODS = ("POST", "PUT", "PATCH")
# A body for a JSON route this test has no valid body for: the corpus is built from it.
GENERIC_BODY: dict[str, Any] = {"name": "value", "count": 1, "items": ["a"], "nested": {"k": "v"}}

MULTIPART_WITHOUT_BOUNDARY = b"--x\r\nContent-Disposition: form-data; name=a\r\n\r\n1\r\n--x--"
_NUMBER = "\ue000number\ue000"  # stands for a raw number literal json.dumps cannot write


# --- The routes --------------------------------------------------------------------------


@dataclass(frozen=True)
class Route:
    profile: str
    pattern: str  # the route as written in the URL conf(s), prefixes included
    name: str | None
    callback: Callable[..., Any]

    @property
    def methods(self) -> list[str]:
        cls = getattr(self.callback, "cls", None)
        if cls is None:
            return ["GET", "POST"]
        names = [m for m in cls.http_method_names if m not in ("head", "options", "trace")]
        return [m.upper() for m in names if hasattr(cls, m)]

    @property
    def is_json(self) -> bool:
        """A route that reads a JSON body: a DRF view with a body method, or a console view
        marked as answering JSON."""
        if getattr(self.callback, "answers_json", False):
            return True
        return hasattr(self.callback, "cls") and any(m in BODY_METHODS for m in self.methods)


def routes(profile: str) -> list[Route]:
    found: list[Route] = []

    def walk(patterns: list[Any], prefix: str, namespace: str | None) -> None:
        for entry in patterns:
            if isinstance(entry, URLResolver):
                walk(entry.url_patterns, prefix + str(entry.pattern), entry.namespace or namespace)
            else:
                assert isinstance(entry, URLPattern)
                name = f"{namespace}:{entry.name}" if namespace and entry.name else entry.name
                found.append(Route(profile, prefix + str(entry.pattern), name, entry.callback))

    walk(get_resolver(f"config.urls.{profile}").url_patterns, "", None)
    return found


_ROUTE_PARAMETER = re.compile(r"<(?:(?P<converter>\w+):)?(?P<name>\w+)>")
_REGEX_GROUP = re.compile(r"\(\?P<(?P<name>\w+)>(?:[^()]|\([^()]*\))*\)")


def fill(pattern: str, values: dict[str, str]) -> str:
    """The pattern with each parameter replaced by its value (route or regex syntax)."""

    def value(name: str) -> str:
        if name not in values:
            pytest.fail(f"no sample value for the path parameter <{name}> of {pattern}: add one")
        return values[name]

    path = _ROUTE_PARAMETER.sub(lambda m: value(m["name"]), pattern)
    path = _REGEX_GROUP.sub(lambda m: value(m["name"]), path)
    return "/" + path.replace("^", "").replace("$", "").replace("\\", "")


def parameters(pattern: str) -> list[str]:
    return [m["name"] for m in _ROUTE_PARAMETER.finditer(pattern)] + [
        m["name"] for m in _REGEX_GROUP.finditer(pattern)
    ]


def test_every_route_pattern_can_be_filled():
    """The walk sees every route of both profiles (regex routes of the admin included)."""
    for profile in PROFILES:
        found = routes(profile)
        assert any(route.name == "console-approval-vote" for route in found)
        assert any(route.pattern.startswith("admin/") for route in found)
        for route in found:
            assert fill(route.pattern, _AnyValue()).startswith("/")


class _AnyValue(dict[str, str]):
    def __contains__(self, key: object) -> bool:
        return True

    def __getitem__(self, key: str) -> str:
        return "1"


# --- The world: credentials and objects for every plane ---------------------------------


@dataclass
class World:
    profile: str
    path_values: dict[str, str]
    bodies: dict[str, Any]
    sdk_headers: dict[str, Any]
    dashboard_headers: dict[str, Any]
    member: Any
    superuser: Any
    clients: dict[str, Client] = field(default_factory=dict)

    def client_for(self, route_callback: Callable[..., Any]) -> tuple[Client, dict[str, Any]]:
        """A client and headers carrying valid credentials of the route's plane."""
        if getattr(route_callback, "answers_json", False):
            return self.signed_in(self.member), {}
        cls = getattr(route_callback, "cls", None)
        if cls is None:  # a page: the admin console, the approver and verifier pages
            return self.signed_in(self.superuser), {}
        authentication = list(cls.authentication_classes)
        if any(issubclass(kind, ApiKeyAuthentication) for kind in authentication):
            return self.signed_in(None), self.sdk_headers
        if any(issubclass(kind, ConsoleJwtAuthentication) for kind in authentication):
            return self.signed_in(None), self.dashboard_headers
        if any(issubclass(kind, SessionAuthentication) for kind in authentication):
            return self.signed_in(self.member), {}
        if not authentication:
            return self.signed_in(None), {}
        pytest.fail(f"teach this test how to authenticate {authentication} ({cls.__name__})")

    def signed_in(self, user: Any) -> Client:
        """One client per console user (signed in once), one without a session."""
        key = user.username if user is not None else ""
        if key not in self.clients:
            client = Client()
            if user is not None:
                client.force_login(user)
            self.clients[key] = client
        return self.clients[key]

    def body_for(self, route: Route) -> Any:
        return copy.deepcopy(self.bodies.get(route.name or "", GENERIC_BODY))


def build_world(profile: str, cast: Any) -> World:
    user_model = get_user_model()
    member = user_model.objects.get(username="acme-owner")
    superuser = user_model.objects.create_superuser("root", "root@example.com", "pw-root")
    key = api_key_issue(org=cast.acme, scopes=list(Scope), label="every scope")
    sdk_headers: dict[str, Any] = (
        {"HTTP_X_API_KEY": key.secret}
        if profile == "keyscoped"
        else {"HTTP_AUTHORIZATION": f"Bearer {key.secret}"}
    )
    tokens = console_tokens_issue(user=member, org_slug="acme")
    alice, bob = Approver("alice"), Approver("bob")
    approver_key_register(org=cast.acme, public_key=alice.public, key_id="alice")
    agent = Agent()
    suspended = suspended_receipt(agent)
    content = suspended["content"]
    client = Client()
    record, co_sig = alice.leg(content)
    if profile == "keyscoped":
        pushed = client.post(
            "/v1/receipts", json.dumps({"receipt": suspended}), JSON, **sdk_headers
        )
        assert pushed.status_code == HTTPStatus.CREATED, pushed.content
        approval_id = Approval.objects.get(action_hash=content["action_hash"]).approval_id
    else:
        opened = client.post(
            "/v1/approvals", json.dumps({"receipt": suspended}), JSON, **sdk_headers
        )
        assert opened.status_code == HTTPStatus.CREATED, opened.content
        approval_id = opened.json()["approvalId"]
    activate_default()
    vote = {"token": alice.token(content, scope=SCOPE), "record": record, "co_sig_b64": co_sig}
    bodies: dict[str, Any] = {"console-approval-vote": vote}
    if profile == "keyscoped":
        bodies |= {
            "receipt-push": {"receipt": agent.receipt()},
            "policy-deploy": {"toml": _policy_toml()},
            "policy-preview": {"toml": _policy_toml(), "days": 7},
            "approval-open": {
                "action_hash": content["action_hash"],
                "rule_id": "",
                "threshold": 1,
                "workflow": "payments/nightly",
                "account": "org/unit",
                "matched_conditions": [{"field": "verb", "op": "eq", "value": "payment"}],
                "scope": SCOPE,
            },
            "approval-submit-token": {
                "token_b64": alice.token(content, scope=SCOPE),
                "action_content": content,
                "decision": "approved",
                "reason": "looks fine",
                "record": record,
                "co_sig_b64": co_sig,
            },
            "approver-key-register": {"key_id": "bob", "public_key": bob.public, "label": "Bob"},
            "evidence-export": {"from": "2026-01-01", "to": "2026-12-31"},
            "console-token": {"org": "acme"},
            "console-token-refresh": {"refresh": tokens.refresh},
        }
    else:
        bodies |= {
            "receipt-push": agent.receipt(),
            "receipt-push-batch": {"receipts": [agent.receipt(), agent.receipt()]},
            "approval-open": {"receipt": suspended_receipt(agent), "routingHint": "oncall"},
            "approval-token": {"token": alice.token(content, scope=SCOPE)},
        }
    path_values = {
        "action_hash": content["action_hash"],
        "receipt_id": content["action_hash"],
        "tile": "0/000.p/1",
        "approval_id": approval_id,
        "ref": approval_id,
        "team_id": "acme",
        "object_id": "1",
        "content_type_id": "1",
        "org_id": str(cast.acme.pk),
        "entry_id": "1",
        "version_id": "1",
        "endpoint_id": "ep_nothing",
        "delivery_id": "1",
        "export_id": "exp_nothing",
        "hold_id": "hold_nothing",
        "replay_id": "rpl_nothing",
        "proposal_id": "1",
        "policy_id": "pol_nothing",
        "policy_hash": "ab" * 32,
        "invitation_id": "1",
        "key_pk": "1",
        "token": "nothing",
        "uuid": "00000000-0000-0000-0000-000000000000",
        "job_id": "1",
        "id": "1",
        "app_label": "tenancy",
        "url": "nothing-here/",
    }
    return World(
        profile=profile,
        path_values=path_values,
        bodies=bodies,
        sdk_headers=sdk_headers,
        dashboard_headers={"HTTP_AUTHORIZATION": f"Bearer {tokens.access}"},
        member=member,
        superuser=superuser,
    )


def _policy_toml() -> str:
    return (
        '[[rule]]\nid = "search.allow"\norder = 10\nenabled = true\n'
        'subject = { kind = "any" }\nverb = "tool_call"\nscope = "*"\ndecision = "allow"\n'
    )


@pytest.fixture(params=PROFILES)
def world(request: pytest.FixtureRequest, cast: Any, settings: Any) -> World:
    profile = request.param
    settings.ROOT_URLCONF = f"config.urls.{profile}"
    settings.API_PROFILE = profile
    # Every request here carries a valid credential; the guessing limiter is not under test.
    settings.AUTH_FAILURE_LIMITS_ENABLED = False
    return build_world(profile, cast)


# --- The corpus ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Variant:
    label: str
    body: bytes
    content_type: str | None = JSON
    position: tuple[Any, ...] | None = None  # set for a change at one place of a valid body


def dumps(value: Any) -> str:
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return text.replace(f'"{_NUMBER}', "").replace(f'{_NUMBER}"', "")


def places(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[str, tuple[Any, ...]]]:
    """Every member name, string and number of ``value``, by path."""
    if isinstance(value, dict):
        for name, member in value.items():
            yield "name", (*path, name)
            yield from places(member, (*path, name))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from places(item, (*path, index))
    elif isinstance(value, str):
        yield "string", path
    elif isinstance(value, int | float) and not isinstance(value, bool):
        yield "number", path


def changed(value: Any, kind: str, path: tuple[Any, ...], new: str) -> Any:
    """A copy of ``value`` with the name, string or number at ``path`` replaced."""
    result = copy.deepcopy(value)
    parent = result
    for step in path[:-1]:
        parent = parent[step]
    last = path[-1]
    if kind == "name":
        items = list(parent.items())
        parent.clear()
        parent.update({(new if name == last else name): member for name, member in items})
    else:
        parent[last] = new
    return result


def with_member(text: str, member: str) -> str:
    """``text`` (an object) with ``member`` (``"name":value``) written first."""
    assert text.startswith("{")
    return "{" + member + ("," + text[1:] if text != "{}" else "}")


def corpus(body: Any, max_depth: int) -> Iterator[Variant]:
    text = dumps(body)
    raw = text.encode()
    for kind, path in places(body):
        if kind == "name":
            mutated = changed(body, kind, path, path[-1] + "\0")
            yield Variant(f"NUL in the name {path}", dumps(mutated).encode(), position=path)
        elif kind == "string":
            parent = body
            for step in path:
                parent = parent[step]
            mutated = changed(body, kind, path, parent + "\0")
            yield Variant(f"NUL in the string at {path}", dumps(mutated).encode(), position=path)
        else:
            for number in HUGE_NUMBERS[:2]:
                mutated = changed(body, kind, path, _NUMBER + number + _NUMBER)
                yield Variant(f"{number[:12]} at {path}", dumps(mutated).encode(), position=path)
    deep = "[" * DEPTH + "]" * DEPTH
    yield Variant("depth 10,000", deep.encode())
    yield Variant("depth 10,000 inside the body", with_member(text, f'"deep":{deep}').encode())
    over = "[" * max_depth + "]" * max_depth  # the body's own object makes it one too deep
    yield Variant("one past the depth limit", with_member(text, f'"deep":{over}').encode())
    yield Variant("10 MB", with_member(text, '"pad":"' + "x" * TEN_MB + '"').encode())
    yield Variant("invalid UTF-8", b'{"bad":"\xff\xfe",' + raw[1:])
    yield Variant("UTF-8 of a surrogate (CESU)", b'{"bad":"\xed\xa0\x80",' + raw[1:])
    yield Variant("escaped lone surrogate", with_member(text, r'"bad":"\ud800"').encode())
    yield Variant("lone surrogate in a name", with_member(text, r'"\udc00x":1').encode())
    yield Variant("NUL in a new member name", with_member(text, r'"a\u0000":1').encode())
    yield Variant("NUL in a new string", with_member(text, r'"a":"\u0000"').encode())
    yield Variant("NaN", with_member(text, '"bad":NaN').encode())
    yield Variant("-Infinity", with_member(text, '"bad":-Infinity').encode())
    for number in HUGE_NUMBERS:
        yield Variant(f"member {number[:12]}", with_member(text, f'"big":{number}').encode())
        yield Variant(f"body {number[:12]}", number.encode())
    first = next(iter(body)) if isinstance(body, dict) and body else None
    if first is not None:
        member = dumps({first: body[first]})[1:-1]
        yield Variant("repeated member name", with_member(text, member).encode())
    yield Variant("byte-order mark", b"\xef\xbb\xbf" + raw)
    yield Variant("trailing data", raw + b" x")
    yield Variant("two values", raw + raw)
    yield Variant("truncated", raw[:-1])
    yield Variant("empty body", b"")
    yield Variant("whitespace only", b"  \n ")
    for other in ("[]", f"[{text}]", '"text"', "null", "true", "0"):
        yield Variant(f"non-object {other[:10]}", other.encode())
    for content_type in (
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=----x",
        "multipart/form-data",
        "application/xml",
        "application/jsonx",
        "",
    ):
        yield Variant(f"Content-Type {content_type or 'none'}", raw, content_type)


# --- Checking answers ---------------------------------------------------------------------


def route_kind(path: str) -> str:
    """What answers the path: ``api`` (a DRF view, or nothing: the profile's 404),
    ``console-json`` or ``page`` (see apps.common.request_guard)."""
    try:
        match = resolve(unquote(path.split("?", 1)[0]))
    except Resolver404:
        return "api"
    if getattr(match.func, "answers_json", False):
        return "console-json"
    return "api" if hasattr(match.func, "cls") else "page"


def bad_input_status(profile: str, kind: str) -> int:
    if kind == "api" and profile == "keyscoped":
        return HTTPStatus.UNPROCESSABLE_ENTITY
    return HTTPStatus.BAD_REQUEST


def body_problem(response: Any, profile: str, kind: str) -> str | None:
    """Why the answer is not in the right error body, or None."""
    content_type = response.get("Content-Type", "")
    if kind == "page":
        return None if content_type.startswith("text/plain") else f"not plain text: {content_type}"
    try:
        body = response.json()
    except ValueError:
        return f"not JSON: {response.content[:80]!r}"
    if kind == "api" and profile == "keyscoped":
        ok = isinstance(body, dict) and isinstance(body.get("detail"), str) and body["detail"]
        return None if ok else f"not {{detail}}: {body!r}"[:200]
    ok = (
        isinstance(body, dict)
        and isinstance(body.get("error"), str)
        and isinstance(body.get("message"), str)
        and body["message"]
    )
    return None if ok else f"not {{error, message}}: {body!r}"[:200]


class Checker:
    def __init__(self, world: World, caplog: pytest.LogCaptureFixture) -> None:
        self.world = world
        self.caplog = caplog
        self.failures: list[str] = []
        self.sent = 0

    def send(
        self,
        route: Route,
        method: str,
        path: str,
        body: bytes | None = None,
        content_type: str | None = JSON,
        extra: dict[str, Any] | None = None,
    ) -> Any:
        client, plane_headers = self.world.client_for(route.callback)
        headers: dict[str, Any] = {**plane_headers, **(extra or {})}
        self.caplog.clear()
        if body:
            response = client.generic(method, path, body, content_type=content_type, **headers)
        elif body is not None and content_type:  # an empty body said to be of this type
            response = client.generic(method, path, CONTENT_TYPE=content_type, **headers)
        else:
            response = client.generic(method, path, **headers)
        self.sent += 1
        errors = [r for r in self.caplog.records if r.levelno >= logging.ERROR]
        if errors:
            self.fail(route, method, path, f"logged at ERROR: {errors[0].getMessage()[:200]}")
        activate_default()
        return response

    def fail(self, route: Route, method: str, path: str, why: str) -> None:
        self.failures.append(f"{self.world.profile} {method} {path[:90]} ({route.name}): {why}")

    def expect(
        self,
        route: Route,
        method: str,
        path: str,
        response: Any,
        *,
        label: str,
        status: int | None,
    ) -> None:
        """``status`` exactly, or any 4xx when None; in the right body either way."""
        kind = route_kind(path)
        code = response.status_code
        wrong = code != status if status is not None else not 400 <= code < 500
        if wrong:
            detail = response.content[:160]
            self.fail(
                route, method, path, f"{label}: {code}, expected {status or '4xx'}: {detail!r}"
            )
            return
        problem = body_problem(response, self.world.profile, kind)
        if problem:
            self.fail(route, method, path, f"{label}: {problem}")

    def report(self) -> None:
        assert self.sent, "no request was sent"
        shown = "\n".join(self.failures[:60])
        assert not self.failures, f"{len(self.failures)} of {self.sent} answers wrong:\n{shown}"


@pytest.fixture
def checker(world: World, caplog: pytest.LogCaptureFixture) -> Checker:
    caplog.set_level(logging.INFO)
    return Checker(world, caplog)


def batch_position_refused(response: Any, position: tuple[Any, ...] | None) -> bool:
    """A team-path batch refused the receipt at ``position`` on its own (200, in order)."""
    if response.status_code != HTTPStatus.OK or not position or len(position) < 2:
        return False
    if position[0] != "receipts" or not isinstance(position[1], int):
        return False
    results = response.json()
    return isinstance(results, list) and results[position[1]]["accepted"] is False


# --- The tests ----------------------------------------------------------------------------


def test_every_json_route_refuses_the_corpus_in_its_error_body(world, checker, settings):
    json_routes = [route for route in routes(world.profile) if route.is_json]
    assert len(json_routes) >= (10 if world.profile == "keyscoped" else 5)
    for route in json_routes:
        path = fill(route.pattern, world.path_values)
        kind = route_kind(path)
        for method in [m for m in route.methods if m in BODY_METHODS]:
            for variant in corpus(world.body_for(route), settings.JSON_BODY_MAX_DEPTH):
                response = checker.send(route, method, path, variant.body, variant.content_type)
                if variant.label == "10 MB":
                    status: int | None = HTTPStatus.REQUEST_ENTITY_TOO_LARGE
                elif variant.position is None or (world.profile, route.name) not in RECEIPT_ROUTES:
                    status = bad_input_status(world.profile, kind)
                else:
                    status = None
                if route.name == "receipt-push-batch" and batch_position_refused(
                    response, variant.position
                ):
                    continue
                checker.expect(route, method, path, response, label=variant.label, status=status)
    checker.report()


def test_every_route_refuses_nul_in_its_path_query_and_headers(world, checker):
    for route in routes(world.profile):
        path = fill(route.pattern, world.path_values)
        tainted_paths = [
            fill(route.pattern, {**world.path_values, name: world.path_values[name] + "%00"})
            for name in parameters(route.pattern)
        ] or [path.rstrip("/") + "%00" + ("/" if path.endswith("/") else "")]
        for method in route.methods:
            for tainted in tainted_paths:
                response = checker.send(route, method, tainted)
                status = bad_input_status(world.profile, route_kind(tainted))
                checker.expect(route, method, tainted, response, label="NUL in path", status=status)
            status = bad_input_status(world.profile, route_kind(path))
            for query in ("?q=%00", "?%00=1", "?trust_level=%00&status=%00"):
                response = checker.send(route, method, path + query)
                checker.expect(route, method, path + query, response, label=query, status=status)
            for header in ({"HTTP_X_PROBE": "a\0b"}, {"HTTP_COOKIE": "sessionid=ab\0cd"}):
                response = checker.send(route, method, path, extra=header)
                checker.expect(route, method, path, response, label="NUL header", status=status)
    checker.report()


def test_every_route_refuses_a_bad_host_and_more_parameters_than_django_parses(world, checker):
    """400 on both profiles (not Django's HTML page with a traceback logged at ERROR)."""
    too_many = "?" + "&".join(
        f"p{i}=1" for i in range(django_settings.DATA_UPLOAD_MAX_NUMBER_FIELDS + 1)
    )
    for route in routes(world.profile):
        path = fill(route.pattern, world.path_values)
        for method in route.methods:
            response = checker.send(route, method, path, extra={"HTTP_HOST": "evil.example"})
            checker.expect(route, method, path, response, label="bad Host", status=400)
            response = checker.send(route, method, path + too_many)
            checker.expect(route, method, path, response, label="too many parameters", status=400)
            if method != "POST" or route_kind(path) == "api":
                continue
            fields = too_many[1:].encode()
            for body, content_type in (
                (fields, "application/x-www-form-urlencoded"),
                (MULTIPART_WITHOUT_BOUNDARY, "multipart/form-data"),
                (b"garbage", "multipart/form-data; boundary=\x01"),
            ):
                response = checker.send(route, method, path, body, content_type)
                label = f"malformed {content_type[:30]}"
                kind_status = (
                    400
                    if route_kind(path) == "page"
                    else bad_input_status(world.profile, "console-json")
                )
                checker.expect(route, method, path, response, label=label, status=kind_status)
    checker.report()


def test_every_route_refuses_a_10_mb_body_with_413(world, checker):
    body = b'{"pad":"' + b"x" * TEN_MB + b'"}'
    for route in routes(world.profile):
        path = fill(route.pattern, world.path_values)
        for method in route.methods:
            response = checker.send(route, method, path, body)
            status = HTTPStatus.REQUEST_ENTITY_TOO_LARGE
            checker.expect(route, method, path, response, label="10 MB", status=status)
    checker.report()


def test_the_settings_keep_the_body_limits_documented():
    assert django_settings.JSON_BODY_MAX_BYTES == 1_048_576
    assert django_settings.JSON_BODY_MAX_DEPTH == 128
    assert django_settings.DATA_UPLOAD_MAX_MEMORY_SIZE == django_settings.JSON_BODY_MAX_BYTES
