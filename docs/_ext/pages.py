"""Pages of the documentation site generated at build time (a Sphinx extension).

Two references are never written by hand, so they cannot drift from what they describe:

- the configuration reference, from the settings' declarations (every ``env_*`` call in
  ``config/settings/`` and every ``os.environ`` read of the service and its gunicorn
  configuration) joined with ``.env.example``, which explains each variable. A variable
  the code reads that ``.env.example`` does not explain, or one ``.env.example`` lists that
  nothing reads, stops the build: the reference is complete or it is not built;
- the API reference, one page per profile, from the OpenAPI snapshots in
  ``tests/data/openapi/`` (the test suite holds them to the documents the service
  generates, so the page describes what a deployment serves).

Each generated page is committed as a stub (so the page exists, is in the table of
contents and says where it comes from); its text is replaced when Sphinx reads it.
Standard library only apart from Sphinx: this runs in the docs build, not in the service.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
CONFIGURATION_PAGE = "configuration"
API_PAGES = {"keyscoped": "api/keyscoped", "teampath": "api/teampath"}
OPENAPI_DIR = ROOT / "tests" / "data" / "openapi"

# The settings' readers (config/env.py) and what each one accepts.
_READERS = {
    "env_str": "text",
    "env_required": "text, required",
    "env_bool": "boolean (`true`/`false`)",
    "env_int": "integer",
    "env_list": "comma-separated list",
    "env_ip_networks": "comma-separated addresses or CIDR networks",
    "env_fernet_keys": "comma-separated Fernet keys (URL-safe base64 of 32 bytes)",
    "env_choice": "one of",
    "env_log_level": "log level: `DEBUG`, `INFO`, `WARNING`, `ERROR` or `CRITICAL`",
}
# Direct reads outside the settings modules: the gunicorn configuration, manage.py, the WSGI
# entry point and the few the application reads itself (the metrics' multiprocess folder).
_DIRECT_READ = re.compile(
    r"""os\.environ(?:\.get|\.setdefault)?[(\[]\s*["']([A-Z][A-Z0-9_]*)["']"""
    r"""|for name in \(((?:\s*"[A-Z][A-Z0-9_]*",?)+)\)"""
)
_VARIABLE_LINE = re.compile(r"^(#\s*)?([A-Z][A-Z0-9_]*)=(.*)$")


@dataclass
class Declaration:
    name: str
    kind: str
    default: str = ""
    bounds: str = ""
    notes: list[str] = field(default_factory=list)
    read_by: list[str] = field(default_factory=list)


@dataclass
class Group:
    description: list[str] = field(default_factory=list)
    variables: list[tuple[str, str]] = field(default_factory=list)  # (name, example)


def _literal(node: ast.expr | None) -> str:
    if node is None:
        return ""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id.startswith("env_")
        and node.args
        and isinstance(node.args[0], ast.Constant)
    ):
        return f"the value of `{node.args[0].value}`"  # a former name read in its place
    try:
        value = ast.literal_eval(node)
    except ValueError:
        return f"`{ast.unparse(node)}`"
    if isinstance(value, bool):
        return "`true`" if value else "`false`"
    if isinstance(value, list | tuple):
        return "`" + ",".join(str(item) for item in value) + "`" if value else "(empty)"
    if isinstance(value, int):
        return f"`{value}`"
    return f"`{value}`" if value != "" else "(empty)"


def settings_declarations(root: Path = ROOT) -> dict[str, Declaration]:
    """Every environment variable the code reads, with its reader, default and bounds."""
    found: dict[str, Declaration] = {}
    # Every reader config/env.py defines counts, described or not: a new one is never missed.
    readers = {
        node.name
        for node in ast.parse((root / "config" / "env.py").read_text()).body
        if isinstance(node, ast.FunctionDef) and node.name.startswith("env_")
    }
    for path in sorted((root / "config" / "settings").glob("*.py")):
        module = f"`config.settings.{path.stem}`"
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in readers
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                continue
            name = node.args[0].value
            kind = _READERS.get(node.func.id, "text")
            if node.func.id == "env_choice" and len(node.args) > 2:
                choices = ast.literal_eval(node.args[2])
                kind += " " + ", ".join(f"`{choice}`" for choice in choices)
            keywords = {keyword.arg: keyword.value for keyword in node.keywords}
            bounds = " to ".join(
                part
                for part in (
                    f"≥ {_literal(keywords['minimum'])}" if "minimum" in keywords else "",
                    f"≤ {_literal(keywords['maximum'])}" if "maximum" in keywords else "",
                )
                if part
            )
            declaration = found.setdefault(name, Declaration(name, kind))
            default = _literal(node.args[1]) if len(node.args) > 1 else ""
            if node.func.id == "env_required":
                note = f"{path.stem}: required"
            elif path.stem == "base":
                declaration.default, declaration.bounds, note = default, bounds, ""
            else:
                note = f"{path.stem}: {default}" if default != declaration.default else ""
            if note:
                declaration.notes.append(note)
            if module not in declaration.read_by:
                declaration.read_by.append(module)
    direct = [root / "manage.py", root / "config" / "wsgi.py", root / "deploy" / "gunicorn.conf.py"]
    direct += sorted((root / "apps").rglob("*.py"))
    for path in direct:
        text = path.read_text()
        for match in _DIRECT_READ.finditer(text):
            names = (
                [match.group(1)]
                if match.group(1)
                else re.findall(r'"([A-Z0-9_]+)"', match.group(2))
            )
            for name in names:
                declaration = found.setdefault(name, Declaration(name, "text"))
                where = f"`{path.relative_to(root).as_posix()}`"
                if where not in declaration.read_by:
                    declaration.read_by.append(where)
    return found


def env_example_groups(root: Path = ROOT) -> list[Group]:
    """``.env.example`` as its groups: the comment lines, then the variables they explain."""
    groups: list[Group] = []
    current = Group()
    for line in [*(root / ".env.example").read_text().splitlines(), ""]:
        variable = _VARIABLE_LINE.match(line)
        if variable:
            current.variables.append((variable.group(2), variable.group(3)))
        elif line.startswith("#"):
            if current.variables:
                groups.append(current)
                current = Group()
            current.description.append(line.lstrip("#").strip())
        elif not line.strip():
            if current.variables:
                groups.append(current)
            current = Group()
    return groups


class ReferenceIncomplete(Exception):
    pass


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def configuration_markdown(root: Path = ROOT) -> str:
    declared = settings_declarations(root)
    groups = env_example_groups(root)
    listed = {name for group in groups for name, _ in group.variables}
    mentioned: dict[int, list[str]] = {}
    for name in declared:
        if name in listed:
            continue
        # A variable explained only in a group's prose (a former name, an alias) joins it.
        for index, group in enumerate(groups):
            if re.search(rf"\b{name}\b", " ".join(group.description)):
                mentioned.setdefault(index, []).append(name)
                break
    placed = listed | {name for names in mentioned.values() for name in names}
    missing = sorted(set(declared) - placed)
    unread = sorted(listed - set(declared))
    if missing or unread:
        raise ReferenceIncomplete(
            "the configuration reference is incomplete: "
            + "; ".join(
                part
                for part in (
                    f"read by the code but not explained in .env.example: {', '.join(missing)}"
                    if missing
                    else "",
                    f"listed in .env.example but read by nothing: {', '.join(unread)}"
                    if unread
                    else "",
                )
                if part
            )
        )
    lines = [
        "# Configuration reference",
        "",
        "<!-- Generated when the site is built (docs/_ext/pages.py) from the settings'",
        "declarations and .env.example; edit those, not this page. -->",
        "",
        "Every setting is an environment variable, parsed strictly: a value that does not parse",
        "stops start-up with one line naming the variable (see",
        "[A bad configuration](getting-started.md#a-bad-configuration)). `.env.example` lists",
        "each one with an example value; this page is generated from it and from the",
        "declarations in `config/settings/` (`manage.py` defaults to `config.settings.local`,",
        "the WSGI entry point to `config.settings.production`, the tests to",
        "`config.settings.test`). *Default* is `config.settings.base`'s unless noted; *where*",
        "names what reads a variable outside the settings modules.",
        "",
    ]
    everything = sorted(set(declared))
    lines += [
        "Jump to: "
        + " · ".join(f'<a href="#{name.lower()}"><code>{name}</code></a>' for name in everything),
        "",
    ]
    for index, group in enumerate(groups):
        names = [name for name, _ in group.variables] + mentioned.get(index, [])
        examples = dict(group.variables)
        lines += ["---", ""]
        if group.description:
            lines += [" ".join(group.description), ""]
        lines += ["| Variable | Type | Default | Example |", "|---|---|---|---|"]
        for name in names:
            declaration = declared[name]
            example = examples.get(name, "")
            kind = " ".join(part for part in (declaration.kind, declaration.bounds) if part)
            direct = [where for where in declaration.read_by if "config.settings" not in where]
            if direct:
                kind += "; where: " + ", ".join(direct)
            default = "; ".join([declaration.default or "(unset)", *declaration.notes])
            cells = (
                f'<a id="{name.lower()}"></a>`{name}`',
                kind,
                default,
                f"`{example}`" if example else "",
            )
            lines.append("| " + " | ".join(_cell(cell) for cell in cells) + " |")
        lines.append("")
    return "\n".join(lines)


# --- API reference -------------------------------------------------------------------


def _text(value: str | None) -> str:
    """An OpenAPI description as one Markdown line (docstrings use reST's double backquotes)."""
    return re.sub(r"\s+", " ", (value or "").replace("``", "`")).strip()


def anchor(*parts: str) -> str:
    """A target name as Sphinx writes its id (lower case, runs of other characters: ``-``)."""
    return re.sub(r"[^a-z0-9]+", "-", "-".join(parts).lower()).strip("-")


def _schema_anchor(profile: str, name: str) -> str:
    return anchor(profile, "schema", name)


def _type(schema: dict[str, Any], profile: str) -> str:
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{_schema_anchor(profile, name)})"
    for combiner, word in (("oneOf", "one of"), ("anyOf", "any of"), ("allOf", "all of")):
        if combiner in schema:
            return f"{word} " + ", ".join(_type(part, profile) for part in schema[combiner])
    kind = schema.get("type", "object" if "properties" in schema else "any")
    if (
        "properties" in schema
        and "enum" not in schema
        and kind == "object"
        and "type" not in schema
    ):
        return "object with " + ", ".join(
            f"`{name}` {_type(member, profile)}" for name, member in schema["properties"].items()
        )
    if kind == "array":
        text = f"array of {_type(schema.get('items', {}), profile)}"
    elif "enum" in schema:
        text = f"{kind}: " + ", ".join(f"`{json.dumps(value)}`" for value in schema["enum"])
    else:
        text = kind + (f" ({schema['format']})" if "format" in schema else "")
    if schema.get("nullable"):
        text += " or null"
    return text


def _constraints(schema: dict[str, Any]) -> str:
    parts = []
    for key, word in (
        ("minLength", "min length"),
        ("maxLength", "max length"),
        ("minimum", "≥"),
        ("maximum", "≤"),
        ("minItems", "min items"),
        ("maxItems", "max items"),
        ("pattern", "pattern"),
        ("default", "default"),
    ):
        if key in schema:
            parts.append(
                f"{word} `{json.dumps(schema[key])}`"
                if key in {"pattern", "default"}
                else f"{word} {schema[key]}"
            )
    return ", ".join(parts)


def _properties(schema: dict[str, Any], profile: str, prefix: str = "") -> list[str]:
    rows = []
    required = set(schema.get("required", []))
    for name, member in schema.get("properties", {}).items():
        path = f"{prefix}{name}"
        description = " ".join(
            part for part in (_text(member.get("description")), _constraints(member)) if part
        )
        mark = "yes" if name in required else ""
        rows.append(
            f"| `{path}` | {_cell(_type(member, profile))} | {mark} | {_cell(description)} |"
        )
        if "properties" in member:
            rows += _properties(member, profile, f"{path}.")
        elif member.get("type") == "array" and "properties" in member.get("items", {}):
            rows += _properties(member["items"], profile, f"{path}[].")
    return rows


def _schema_block(schema: dict[str, Any], profile: str) -> list[str]:
    lines = []
    if schema.get("description"):
        lines += [_text(schema["description"]), ""]
    rows = _properties(schema, profile)
    if rows:
        lines += ["| Member | Type | Required | Description |", "|---|---|---|---|", *rows, ""]
        if schema.get("additionalProperties") is False:
            lines += ["No other member is accepted.", ""]
    else:
        lines += [f"Type: {_type(schema, profile)}.", ""]
    return lines


def api_markdown(profile: str, document: dict[str, Any]) -> str:
    info = document["info"]
    lines = [
        f"# {info['title']}",
        "",
        "<!-- Generated when the site is built (docs/_ext/pages.py) from",
        f"tests/data/openapi/{profile}.json; edit the views' serializers and schema,",
        "not this page. -->",
        "",
        _text(info.get("description")),
        "",
        f"OpenAPI {document['openapi']}, version {info['version']}. A deployment serves this",
        "document at `GET /v1/schema` and a Swagger UI at `GET /v1/docs`",
        "([API description](index.md)).",
        "",
        "## Operations",
        "",
        "| Method and path | Summary |",
        "|---|---|",
    ]
    operations = [
        (path, method, operation)
        for path, methods in document["paths"].items()
        for method, operation in methods.items()
        if isinstance(operation, dict) and "responses" in operation
    ]
    for path, method, operation in operations:
        lines.append(
            f"| [`{method.upper()} {path}`](#{anchor(profile, 'op', operation['operationId'])}) | "
            f"{_cell(_text(operation.get('summary')))} |"
        )
    lines.append("")
    for path, method, operation in operations:
        lines += [
            f"({anchor(profile, 'op', operation['operationId'])})=",
            f"### `{method.upper()} {path}`",
            "",
        ]
        if operation.get("summary"):
            lines += [f"**{_text(operation['summary'])}**", ""]
        if operation.get("description"):
            lines += [_text(operation["description"]), ""]
        security = [name for requirement in operation.get("security", []) for name in requirement]
        lines += [
            "Credential: "
            + (
                ", or ".join(
                    f"[`{name}`](#{anchor(profile, 'security', name)})" for name in security
                )
                if security
                else "none (public)"
            )
            + ".",
            "",
        ]
        parameters = operation.get("parameters", [])
        if parameters:
            lines += ["| Parameter | In | Type | Required | Description |", "|---|---|---|---|---|"]
            for parameter in parameters:
                schema = parameter.get("schema", {})
                description = " ".join(
                    part
                    for part in (_text(parameter.get("description")), _constraints(schema))
                    if part
                )
                mark = "yes" if parameter.get("required") else ""
                lines.append(
                    f"| `{parameter['name']}` | {parameter['in']} | "
                    f"{_cell(_type(schema, profile))} | {mark} | {_cell(description)} |"
                )
            lines.append("")
        body = operation.get("requestBody")
        if body:
            for media, content in body.get("content", {}).items():
                lines += [
                    f"Request body ({'required' if body.get('required') else 'optional'}, "
                    f"`{media}`): {_type(content.get('schema', {}), profile)}.",
                    "",
                ]
        lines += ["| Status | Meaning | Body | Headers |", "|---|---|---|---|"]
        for status, answer in operation["responses"].items():
            bodies = ", ".join(
                f"{_type(content.get('schema', {}), profile)} (`{media}`)"
                for media, content in answer.get("content", {}).items()
            )
            headers = ", ".join(f"`{name}`" for name in answer.get("headers", {}))
            meaning = _cell(_text(answer.get("description")))
            lines.append(f"| {status} | {meaning} | {_cell(bodies)} | {headers} |")
        lines.append("")
    lines += ["## Credentials", ""]
    for name, scheme in document["components"].get("securitySchemes", {}).items():
        where = (
            f"`{scheme['name']}` {scheme['in']}"
            if scheme.get("type") == "apiKey"
            else f"HTTP `{scheme.get('scheme', '')}`"
        )
        lines += [
            f"({anchor(profile, 'security', name)})=",
            f"### `{name}`",
            "",
            f"{where}. {_text(scheme.get('description'))}",
            "",
        ]
    lines += ["## Schemas", ""]
    for name, schema in document["components"].get("schemas", {}).items():
        lines += [
            f"({_schema_anchor(profile, name)})=",
            f"### {name}",
            "",
            *_schema_block(schema, profile),
        ]
    return "\n".join(lines)


# --- the Sphinx extension --------------------------------------------------------------


def generated_pages(root: Path = ROOT) -> dict[str, str]:
    pages = {CONFIGURATION_PAGE: configuration_markdown(root)}
    for profile, page in API_PAGES.items():
        document = json.loads((root / "tests" / "data" / "openapi" / f"{profile}.json").read_text())
        pages[page] = api_markdown(profile, document)
    return pages


_generated: dict[str, str] = {}


def _generate(app: Any) -> None:
    _generated.update(generated_pages())


def _fill_generated(app: Any, docname: str, source: list[str]) -> None:
    if docname in _generated:
        source[0] = _generated[docname]


def setup(app: Any) -> dict[str, Any]:
    app.connect("builder-inited", _generate)
    app.connect("source-read", _fill_generated)
    return {"parallel_read_safe": False, "parallel_write_safe": True}
