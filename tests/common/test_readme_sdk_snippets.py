"""The documentation's heso SDK snippets, read as a newcomer pastes them (without the SDK).

They are on two pages of the site: docs/getting-started.md (the first ten minutes) and
docs/sdk.md (the whole flow).

Each Python snippet runs as a script of its own, in a fresh process: a name it uses must be
defined in it (or imported) before that use, never left over from another snippet. The
agent is scaffolded outside the clone (whatever is inside is linted by `make test`). The
flows the pages promise have their calls in the snippets. deploy/interop/heso_sdk_check.py
runs the same flows with the real SDK against a running service.
"""

from __future__ import annotations

import ast
import builtins
import re
from pathlib import Path

import pytest
from django.conf import settings

DOCS = Path(settings.BASE_DIR) / "docs"
BLOCK = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)
PRELUDE_MODULE = "countersign"  # the file the SDK section has the reader save first


def section(page: str, title: str) -> str:
    text = (DOCS / page).read_text()
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:] if end == -1 else text[start:end]


def blocks(text: str, language: str) -> list[str]:
    return [code for lang, code in BLOCK.findall(text) if lang == language]


SDK_SECTION = section("sdk.md", "Use it with the heso SDK")
QUICKSTART = section("getting-started.md", "Quickstart: the first ten minutes")
PYTHON = blocks(QUICKSTART, "python") + blocks(SDK_SECTION, "python")
SHELL = blocks(QUICKSTART, "sh") + blocks(SDK_SECTION, "sh")


def prelude_names() -> set[str]:
    (prelude,) = [code for code in PYTHON if code.startswith(f"# {PRELUDE_MODULE}.py")]
    return {name for name, _ in defined_names(ast.parse(prelude))}


def defined_names(tree: ast.AST) -> list[tuple[str, int]]:
    """Every name the code binds, with the line binding it."""
    found: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            found.append((node.id, node.lineno))
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            found.append((node.name, node.lineno))
            if not isinstance(node, ast.ClassDef):
                arguments = node.args
                for arg in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs,
                            arguments.vararg, arguments.kwarg]:  # fmt: skip
                    if arg is not None:
                        found.append((arg.arg, node.lineno))
        elif isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                found.append(((alias.asname or alias.name).split(".")[0], node.lineno))
        elif isinstance(node, ast.ExceptHandler) and node.name:
            found.append((node.name, node.lineno))
    return found


def undefined_uses(code: str) -> list[str]:
    tree = ast.parse(code)
    first_binding: dict[str, int] = {}
    for name, line in defined_names(tree):
        first_binding[name] = min(line, first_binding.get(name, line))
    return [
        f"line {node.lineno}: {node.id}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Name)
        and isinstance(node.ctx, ast.Load)
        and not hasattr(builtins, node.id)
        and first_binding.get(node.id, node.lineno + 1) > node.lineno
    ]


def test_the_section_has_its_snippets() -> None:
    assert len(PYTHON) >= 6
    assert any("heso init" in code for code in SHELL)


@pytest.mark.parametrize("code", PYTHON, ids=lambda code: code.splitlines()[0][:40])
def test_each_python_snippet_defines_what_it_uses(code: str) -> None:
    assert undefined_uses(code) == []


@pytest.mark.parametrize("code", PYTHON, ids=lambda code: code.splitlines()[0][:40])
def test_what_a_snippet_imports_from_the_saved_prelude_is_in_it(code: str) -> None:
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.ImportFrom) and node.module == PRELUDE_MODULE:
            assert {alias.name for alias in node.names} <= prelude_names()


def test_the_agent_is_scaffolded_outside_the_clone() -> None:
    for code in SHELL:
        for command in re.findall(r"heso init(?:\s+(\S+))?", code):
            assert command.startswith(("~/", "/", "$HOME")), f"`heso init {command}` in the clone"


def test_the_promised_flows_have_their_calls() -> None:
    python = "\n".join(PYTHON)
    used = {node.attr for node in ast.walk(ast.parse(python)) if isinstance(node, ast.Attribute)}
    assert {"fetch_policy", "push_receipt", "open_approval", "poll_approval", "get_l1_parts",
            "finalize_l1", "get_quorum_parts", "finalize_quorum"} <= used  # fmt: skip
    opens = [
        node
        for node in ast.walk(ast.parse(python))
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "open_approval"
    ]
    assert any(keyword.arg == "threshold" for node in opens for keyword in node.keywords)
    assert "/proof" in python
    assert '"transparency"' in python
    (verify,) = [code for code in SHELL if "verify_transparency" in code]
    assert "--required 0" in verify
    assert "--origin localhost/v1/log" in verify
