"""The import structure of ``apps/`` (README "Layout"): a test fails when code reaches the
wrong way.

- ``apps/common`` imports no other app;
- an app imports only apps on a lower floor (never a sibling on its own floor, never one
  above);
- no view module imports another (shared HTTP code lives in each profile's ``base``); a
  view module is any module that defines a view (a class based on a ``...View`` or
  ``...ViewSet``, or a function taking ``request`` and answering a response), wherever it
  lives;
- the pure packages import nothing from Django and no app code but other pure packages
  and the pure ground-floor modules (``apps.common.vocabulary``, ``apps.common.json_text``);
- imports are absolute (a relative import hides where it points).

Every ``import`` counts, including those inside functions, and so do the other ways code
reaches a module or model: a dotted path in a string (``"apps.api.base.X"``, resolved by
``import_string`` or a setting) and ``apps.get_model("<app>", ...)``. Docstrings are prose,
not references.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

APPS = Path(__file__).resolve().parent.parent / "apps"

# From the ground up; an import only ever points to a lower number.
FLOORS = {
    "common": 0,
    "tenancy": 1,
    "receipts": 2,
    "approvals": 3,
    "transparency": 3,
    # Above approvals: a co-signed policy change is voted with approver keys and tokens.
    "policy": 4,
    "audit": 5,
    "analytics": 5,
    "events": 6,
    "api": 7,
    "console": 7,
}
PURE_PACKAGES = (
    "apps.receipts.verifier",
    "apps.policy.rules",
    "apps.approvals.tokens",
    "apps.transparency.tree",
)
# Ground-floor modules that are themselves pure: the format's words and the JSON text rules.
PURE_ALLOWED = (*PURE_PACKAGES, "apps.common.vocabulary", "apps.common.json_text")


def module_name(path: Path) -> str:
    parts = path.relative_to(APPS.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


# A dotted path to app code, as ``import_string`` and Django's settings resolve it.
DOTTED_PATH = re.compile(r"apps(\.[A-Za-z_][A-Za-z0-9_]*)+")
# Django's and DRF's view classes (View, APIView, GenericAPIView, RedirectView, ViewSet...):
# a class based on one of them, or on a class of ours that is, is a view.
FRAMEWORK_VIEW = re.compile(r"\w*View(Set)?")
# A function so decorated is a view.
VIEW_DECORATORS = {
    "api_view", "csrf_exempt", "require_http_methods", "require_GET", "require_POST",
    "require_safe", "login_required", "staff_member_required",
}  # fmt: skip


def _name(node: ast.expr) -> str:
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Call | ast.Subscript):
        return _name(node.func if isinstance(node, ast.Call) else node.value)
    return ""


@cache
def _view_modules(root: Path) -> frozenset[str]:
    """The modules under ``root`` that define a view at module level."""
    trees = {
        module_name(path): ast.parse(path.read_text())
        for path in sorted(root.rglob("*.py"))
        if "migrations" not in path.parts and path.parent != root
    }
    classes = [
        (module, node.name, {_name(base) for base in node.bases})
        for module, tree in trees.items()
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef)
    ]
    ours = {name for _, name, _ in classes}
    views = set()
    while True:  # until no class joins: a class based on a view is a view
        more = {
            name
            for _, name, bases in classes
            if name not in views
            and any(b in views or (b not in ours and FRAMEWORK_VIEW.fullmatch(b)) for b in bases)
        }
        if not more:
            break
        views |= more
    found = {module for module, name, _ in classes if name in views}
    for module, tree in trees.items():
        for node in tree.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and (
                VIEW_DECORATORS & {_name(decorator) for decorator in node.decorator_list}
            ):
                found.add(module)
    return frozenset(found)


def is_view_module(module: str) -> bool:
    """A module that defines views. A ``base`` (a profile's, or a ``<feature>_base`` both
    profiles share) is not one: it holds the shared HTTP code the views are built on."""
    parts = module.split(".")
    if len(parts) < 2 or parts[-1] == "base" or parts[-1].endswith("_base"):
        return False
    in_profile = parts[1] == "api" and len(parts) == 4 and parts[2] in ("keyscoped", "teampath")
    return in_profile or module == "apps.console.views" or module in _view_modules(APPS)


def is_routing(module: str) -> bool:
    """A URL configuration: it imports the views it routes to, by design."""
    last = module.split(".")[-1]
    return last == "urls" or last.endswith("_urls")


def _docstrings(tree: ast.Module) -> set[int]:
    """The ids of the string constants that stand alone as statements (docstrings)."""
    return {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    }


def imports(path: Path) -> Iterator[tuple[int, str]]:
    """Every module the file reaches (``apps.<app>`` for a model by label), with its line;
    a relative import as its dots and module."""
    tree = ast.parse(path.read_text(), filename=str(path))
    prose = _docstrings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.level > 0:
            yield node.lineno, "." * node.level + (node.module or "")
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.lineno, node.module
            for alias in node.names:  # ``from apps.x import module``
                yield node.lineno, f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if id(node) not in prose and DOTTED_PATH.fullmatch(node.value):
                yield node.lineno, node.value
        elif isinstance(node, ast.Call) and _name(node.func) == "get_model" and node.args:
            label = node.args[0]
            if isinstance(label, ast.Constant) and isinstance(label.value, str):
                yield node.lineno, f"apps.{label.value.split('.')[0]}"


def source_files() -> list[Path]:
    return sorted(p for p in APPS.rglob("*.py") if "migrations" not in p.parts and p.parent != APPS)


def violations(path: Path) -> Iterator[str]:
    module = module_name(path)
    app = module.split(".")[1]
    pure = module.startswith(PURE_PACKAGES)
    for line, target in imports(path):
        where = f"{path.relative_to(APPS.parent)}:{line} imports {target}"
        if target.startswith("."):
            yield f"{where}: a relative import (write the absolute module)"
            continue
        if pure and (target == "django" or target.startswith("django.")):
            yield f"{where}: a pure package imports Django"
        if not target.startswith("apps.") or target.count(".") < 1:
            continue
        other = target.split(".")[1]
        if pure and not target.startswith(PURE_ALLOWED):
            yield f"{where}: a pure package imports app code"
        if other != app and other in FLOORS and FLOORS[other] >= FLOORS[app]:
            yield f"{where}: {app} (floor {FLOORS[app]}) reaches {other} (floor {FLOORS[other]})"
        if target != module and is_view_module(target) and is_view_module(module):
            if is_routing(module):
                continue
            yield f"{where}: a view module imports another"


def test_every_app_is_on_a_floor() -> None:
    apps = {p.name for p in APPS.iterdir() if (p / "__init__.py").exists()}
    assert apps <= set(FLOORS), apps - set(FLOORS)


# Known violations, (file, target), each with its reason. Delete an entry once its violation
# is gone (test_known_violations_are_still_there says when).
KNOWN: set[tuple[str, str]] = {
    # The evidence export task's path before it moved to audit: queued rows written by the
    # previous release still name it, and the reclaim matches them (one release).
    ("apps/audit/exports.py", "apps.events.tasks.build_evidence_export"),
}


def is_known(violation: str) -> bool:
    return any(
        violation.startswith(f"{file}:") and f" imports {target}:" in violation
        for file, target in KNOWN
    )


@pytest.mark.parametrize("path", source_files(), ids=lambda p: str(p.relative_to(APPS.parent)))
def test_imports_point_down(path: Path) -> None:
    assert [found for found in violations(path) if not is_known(found)] == []


def test_known_violations_are_still_there() -> None:
    """The known list holds no entry that no longer applies."""
    found = {found for path in source_files() for found in violations(path)}
    stale = {
        (file, target)
        for file, target in KNOWN
        if not any(f.startswith(f"{file}:") and f" imports {target}:" in f for f in found)
    }
    assert stale == set()


def fake_apps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, files: dict[str, str]) -> Path:
    """An ``apps/`` tree of these files, which the checker then reads instead of ours."""
    fake = tmp_path / "apps"
    for name, text in files.items():
        (fake / name).parent.mkdir(parents=True, exist_ok=True)
        (fake / name).write_text(text)
    monkeypatch.setattr(__import__(__name__, fromlist=["APPS"]), "APPS", fake)
    return fake


def one(path: Path) -> str:
    """The file's one violation."""
    (found,) = violations(path)
    return found


def test_the_check_catches_dotted_paths_that_point_up(tmp_path, monkeypatch) -> None:
    fake = fake_apps(tmp_path, monkeypatch, {
        "common/x.py": 'AUTH = "apps.tenancy.authentication.ApiKeyAuthentication"\n',
        "receipts/x.py": 'def f() -> str:\n    return "apps.approvals.services.approval_open"\n',
        "tenancy/x.py": '"""Its sibling is apps.receipts.models, named in prose."""\n\n'
                        'SITE = "apps.tenancy.admin_site.ConsoleAdminSite"\n'
                        'ERROR = "apps.common.errors.DomainError"\n'
                        'TEXT = "see apps.receipts.models"\n',
    })  # fmt: skip
    assert "common (floor 0) reaches tenancy" in one(fake / "common/x.py")
    assert "reaches approvals" in one(fake / "receipts/x.py")
    # A path to its own app or below, a docstring, a sentence: none is a reference up.
    assert list(violations(fake / "tenancy/x.py")) == []


def test_the_check_catches_get_model_that_points_up(tmp_path, monkeypatch) -> None:
    fake = fake_apps(tmp_path, monkeypatch, {
        "receipts/x.py": "from django.apps import apps\n\n\ndef f():\n"
                         '    return apps.get_model("approvals", "Approval")\n',
        "transparency/x.py": "from django.apps import apps\n\n"
                             'M = apps.get_model("approvals.Approval")\n',
        "approvals/x.py": "from django.apps import apps\n\n"
                          'M = apps.get_model("receipts", "MirrorEntry")\n',
    })  # fmt: skip
    assert "receipts (floor 2) reaches approvals" in one(fake / "receipts/x.py")
    assert "reaches approvals" in one(fake / "transparency/x.py")  # a sibling
    assert list(violations(fake / "approvals/x.py")) == []


def test_the_check_catches_relative_imports(tmp_path, monkeypatch) -> None:
    fake = fake_apps(tmp_path, monkeypatch, {
        "tenancy/x.py": "from . import models\n",
        "tenancy/y.py": "from .models import Org\n",
        "tenancy/z.py": "def f():\n    from ..common import errors\n",
    })  # fmt: skip
    for name in ("tenancy/x.py", "tenancy/y.py", "tenancy/z.py"):
        assert "a relative import" in one(fake / name), name


def test_the_check_knows_view_modules_wherever_they_are(tmp_path, monkeypatch) -> None:
    fake = fake_apps(tmp_path, monkeypatch, {
        # A base module holds what views are built on; it is not a view module itself.
        "common/base.py": "from rest_framework.views import APIView\n\n\n"
                          "class BaseApi(APIView):\n    pass\n",
        # A view through a class of ours that is one.
        "audit/downloads.py": "from apps.common.base import BaseApi\n\n\n"
                              "class DownloadApi(BaseApi):\n    pass\n",
        # A view function, by its decorator, importing another view module.
        "audit/exports.py": "from django.views.decorators.csrf import csrf_exempt\n\n"
                            "from apps.audit.downloads import DownloadApi\n\n\n"
                            "@csrf_exempt\ndef export(request):\n    return DownloadApi\n",
        # A view on Django's own class, importing another view module.
        "audit/pages.py": "from django.views.generic import RedirectView\n\n"
                          "from apps.audit import exports\n\n\n"
                          "class Go(RedirectView):\n    pass\n",
        # URL configurations import views by design; other modules may too.
        "audit/urls.py": "from apps.audit import downloads, exports, pages\n",
        "audit/selectors.py": "from apps.audit.downloads import DownloadApi\n",
    })  # fmt: skip
    assert list(violations(fake / "audit/downloads.py")) == []
    assert "a view module imports another" in one(fake / "audit/exports.py")
    assert "a view module imports another" in one(fake / "audit/pages.py")
    assert list(violations(fake / "audit/urls.py")) == []
    assert list(violations(fake / "audit/selectors.py")) == []


def test_the_check_catches_each_kind_of_violation(tmp_path, monkeypatch) -> None:
    fake = tmp_path / "apps"
    for name, text in {
        "common/x.py": "from apps.tenancy.models import Org\n",
        "receipts/x.py": "def f():\n    from apps.approvals import services\n",
        "transparency/x.py": "import apps.approvals.models\n",
        "api/keyscoped/receipts.py": "from apps.api.teampath.receipts import parse_body\n",
        "receipts/verifier/x.py": "from django.conf import settings\n",
        "tenancy/x.py": "from apps.common.errors import DomainError\n",
    }.items():
        (fake / name).parent.mkdir(parents=True, exist_ok=True)
        (fake / name).write_text(text)
    monkeypatch.setattr(__import__(__name__, fromlist=["APPS"]), "APPS", fake)
    found = {
        name: list(violations(fake / name))
        for name in ("common/x.py", "receipts/x.py", "transparency/x.py",
                     "api/keyscoped/receipts.py", "receipts/verifier/x.py", "tenancy/x.py")
    }  # fmt: skip
    assert "reaches tenancy" in found["common/x.py"][0]
    assert "reaches approvals" in found["receipts/x.py"][0]
    assert "reaches approvals" in found["transparency/x.py"][0]  # a sibling on its floor
    assert "a view module imports another" in found["api/keyscoped/receipts.py"][0]
    assert "a pure package imports Django" in found["receipts/verifier/x.py"][0]
    assert found["tenancy/x.py"] == []


def test_the_clients_stand_alone() -> None:
    """``clients/`` is standard library only: no Django, no service code."""
    root = APPS.parent / "clients"
    found = [
        f"{path.relative_to(root.parent)}:{line} imports {target}"
        for path in sorted(root.rglob("*.py"))
        for line, target in imports(path)
        if target.split(".")[0] in ("apps", "django", "rest_framework", "config")
    ]
    assert found == []
