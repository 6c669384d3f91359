"""The OpenAPI documents are inferred from serializers; the JSON Schema written by hand (the
error bodies, the signed receipt, the security schemes, ``/metrics``, the statuses of each
operation) stays under 300 lines of the API floor."""

from __future__ import annotations

import ast
from pathlib import Path

API = Path(__file__).resolve().parent.parent.parent / "apps" / "api"
LIMIT = 300

# A dict literal holding one of these keys is JSON Schema (or an OpenAPI object) by hand.
SCHEMA_KEYS = {
    "type", "$ref", "properties", "allOf", "oneOf", "anyOf", "enum", "items", "pattern",
    "format", "nullable", "additionalProperties", "discriminator", "required", "schema",
    "responses", "in", "scheme", "bearerFormat",
}  # fmt: skip
# Calls that build schema by hand from their arguments.
SCHEMA_HELPERS = {"_object", "_obj", "_approval", "_envelope", "ref", "_ref"}


def hand_written_lines(path: Path) -> int:
    """Non-blank lines of ``path`` inside an outermost hand-written schema expression."""
    text = path.read_text()
    source = text.splitlines()
    lines: set[int] = set()

    def visit(node: ast.AST, inside: bool) -> None:
        hit = (
            isinstance(node, ast.Dict)
            and any(isinstance(k, ast.Constant) and k.value in SCHEMA_KEYS for k in node.keys)
        ) or (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in SCHEMA_HELPERS
        )
        if hit and not inside:
            lines.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
        for child in ast.iter_child_nodes(node):
            visit(child, inside or hit)

    visit(ast.parse(text), False)
    return sum(1 for line in lines if source[line - 1].strip())


def test_the_hand_written_schema_stays_under_300_lines() -> None:
    counted = {str(p.relative_to(API)): hand_written_lines(p) for p in sorted(API.rglob("*.py"))}
    assert sum(counted.values()) < LIMIT, {name: n for name, n in counted.items() if n}


def test_the_count_sees_a_schema_written_by_hand(tmp_path) -> None:
    module = tmp_path / "x.py"
    module.write_text(
        'A = {\n    "type": "object",\n\n    "properties": {"a": {"type": "string"}},\n}\n'
    )
    assert hand_written_lines(module) == 4  # the blank line is not counted
