"""The import structure of ``apps/`` (README "Layout"): a test fails when code reaches the
wrong way.

- ``apps/common`` imports no other app;
- an app imports only apps on a lower floor (never a sibling on its own floor, never one
  above);
- no view module imports another (shared HTTP code lives in each profile's ``base``);
- the pure packages import nothing from Django and no app code but other pure packages
  and the pure ground-floor modules (``apps.common.vocabulary``, ``apps.common.json_text``).

Every ``import`` counts, including those inside functions.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

APPS = Path(__file__).resolve().parent.parent / "apps"

# From the ground up; an import only ever points to a lower number.
FLOORS = {
    "common": 0,
    "tenancy": 1,
    "receipts": 2,
    "policy": 3,
    "approvals": 3,
    "transparency": 3,
    "audit": 4,
    "analytics": 4,
    "events": 5,
    "api": 6,
    "console": 6,
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


def is_view_module(module: str) -> bool:
    parts = module.split(".")
    in_profile = parts[1] == "api" and len(parts) == 4 and parts[2] in ("keyscoped", "teampath")
    return (in_profile and parts[3] != "base") or module == "apps.console.views"


def imports(path: Path) -> Iterator[tuple[int, str]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.lineno, node.module
            for alias in node.names:  # ``from apps.x import module``
                yield node.lineno, f"{node.module}.{alias.name}"


def source_files() -> list[Path]:
    return sorted(p for p in APPS.rglob("*.py") if "migrations" not in p.parts and p.parent != APPS)


def violations(path: Path) -> Iterator[str]:
    module = module_name(path)
    app = module.split(".")[1]
    pure = module.startswith(PURE_PACKAGES)
    for line, target in imports(path):
        where = f"{path.relative_to(APPS.parent)}:{line} imports {target}"
        if pure and (target == "django" or target.startswith("django.")):
            yield f"{where}: a pure package imports Django"
        if not target.startswith("apps.") or target.count(".") < 1:
            continue
        other = target.split(".")[1]
        if pure and not target.startswith(PURE_ALLOWED):
            yield f"{where}: a pure package imports app code"
        if other != app and other in FLOORS and FLOORS[other] >= FLOORS[app]:
            yield f"{where}: {app} (floor {FLOORS[app]}) reaches {other} (floor {FLOORS[other]})"
        if is_view_module(module) and is_view_module(target) and target != module:
            yield f"{where}: a view module imports another"


def test_every_app_is_on_a_floor() -> None:
    apps = {p.name for p in APPS.iterdir() if (p / "__init__.py").exists()}
    assert apps <= set(FLOORS), apps - set(FLOORS)


@pytest.mark.parametrize("path", source_files(), ids=lambda p: str(p.relative_to(APPS.parent)))
def test_imports_point_down(path: Path) -> None:
    assert list(violations(path)) == []


def test_the_check_catches_each_kind_of_violation(tmp_path, monkeypatch) -> None:
    fake = tmp_path / "apps"
    for name, text in {
        "common/x.py": "from apps.tenancy.models import Org\n",
        "receipts/x.py": "def f():\n    from apps.approvals import services\n",
        "policy/x.py": "import apps.approvals.models\n",
        "api/keyscoped/receipts.py": "from apps.api.teampath.receipts import parse_body\n",
        "receipts/verifier/x.py": "from django.conf import settings\n",
        "tenancy/x.py": "from apps.common.errors import DomainError\n",
    }.items():
        (fake / name).parent.mkdir(parents=True, exist_ok=True)
        (fake / name).write_text(text)
    monkeypatch.setattr(__import__(__name__, fromlist=["APPS"]), "APPS", fake)
    found = {
        name: list(violations(fake / name))
        for name in ("common/x.py", "receipts/x.py", "policy/x.py", "api/keyscoped/receipts.py",
                     "receipts/verifier/x.py", "tenancy/x.py")
    }  # fmt: skip
    assert "reaches tenancy" in found["common/x.py"][0]
    assert "reaches approvals" in found["receipts/x.py"][0]
    assert "reaches approvals" in found["policy/x.py"][0]  # a sibling on the same floor
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
