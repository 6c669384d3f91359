"""The documentation site builds, and everything in it that points somewhere arrives.

The site is built as `make docs` builds it (Sphinx, warnings as errors, every page read
afresh) into a temporary folder; then every link, script and stylesheet of every built
page is followed: the file must exist and the anchor must be an id in it, and nothing may
load from another host (the site works offline). The two generated references are held to
what they describe: every environment variable the code reads has its row in the
configuration reference, and every operation of each OpenAPI document its section in the
API reference. The README's links into the site arrive too.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from types import ModuleType
from urllib.parse import unquote, urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def load_generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_pages", DOCS / "_ext" / "pages.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    # As `make docs` builds it: every page read afresh, warnings as errors.
    command = ["-E", "-W", "--keep-going", "-q", "-b", "html", "-d", str(out / "doctrees")]
    build = subprocess.run(
        [sys.executable, "-m", "sphinx", *command, str(DOCS), str(out / "html")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert build.returncode == 0, build.stderr + build.stdout
    return out / "html"


class Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.references: list[tuple[str, str]] = []  # (tag, url)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        for name in ("id", "name") if tag == "a" else ("id",):
            if values.get(name):
                self.ids.add(str(values[name]))
        for name in ("href", "src"):
            if values.get(name):
                self.references.append((tag, str(values[name])))


def parse(path: Path) -> Page:
    page = Page()
    page.feed(path.read_text())
    return page


def pages(site: Path) -> dict[Path, Page]:
    return {path: parse(path) for path in sorted(site.rglob("*.html"))}


def broken_references(site: Path) -> list[str]:
    parsed = pages(site)
    broken = []
    for path, page in parsed.items():
        for tag, url in page.references:
            parts = urlsplit(url)
            where = f"{path.relative_to(site)}: <{tag}> {url}"
            if parts.scheme in {"http", "https"} or url.startswith("//"):
                if tag != "a":
                    broken.append(f"{where} loads from another host")
                continue
            if parts.scheme:  # mailto:, data:
                continue
            target = (path.parent / unquote(parts.path)).resolve() if parts.path else path
            if target.is_dir():
                target = target / "index.html"
            if not target.exists():
                broken.append(f"{where}: no such file")
                continue
            if parts.fragment and target.suffix == ".html":
                ids = (parsed.get(target) or parse(target)).ids
                if unquote(parts.fragment) not in ids:
                    broken.append(f"{where}: no anchor #{parts.fragment}")
    return broken


def test_the_site_builds_and_every_internal_link_and_anchor_resolves(site: Path) -> None:
    assert (site / "index.html").exists()
    assert broken_references(site) == []


def test_a_link_to_a_missing_anchor_fails_the_check(site: Path, tmp_path: Path) -> None:
    copy = tmp_path / "html"
    shutil.copytree(site, copy)
    index = copy / "index.html"
    index.write_text(
        index.read_text().replace("</body>", '<a href="sdk.html#no-such-heading">x</a></body>')
    )
    assert broken_references(copy) == [
        "index.html: <a> sdk.html#no-such-heading: no anchor #no-such-heading"
    ]


def test_every_page_in_docs_is_built(site: Path) -> None:
    sources = {
        path.relative_to(DOCS).with_suffix(".html")
        for path in DOCS.rglob("*.md")
        if not path.relative_to(DOCS).parts[0].startswith("_")
    }
    assert sources <= {path.relative_to(site) for path in site.rglob("*.html")}


# Every environment variable the code reads, found independently of the generator: the
# settings' readers and the direct reads of manage.py, the WSGI entry point, gunicorn's
# configuration and the apps.
READS = re.compile(
    r"""\benv_[a-z_]+\(\s*["']([A-Z][A-Z0-9_]*)["']"""
    r"""|os\.environ(?:\.get|\.setdefault)?[(\[]\s*["']([A-Z][A-Z0-9_]*)["']"""
)


def variables_the_code_reads() -> set[str]:
    files = [*(ROOT / "config" / "settings").glob("*.py"), ROOT / "manage.py"]
    files += [ROOT / "config" / "wsgi.py", ROOT / "deploy" / "gunicorn.conf.py"]
    files += (ROOT / "apps").rglob("*.py")
    found = {
        name
        for path in files
        for match in READS.finditer(path.read_text())
        for name in match.groups()
        if name
    }
    # gunicorn.conf.py reads its worker count through a loop over two names.
    gunicorn = (ROOT / "deploy" / "gunicorn.conf.py").read_text()
    for names in re.findall(r"for name in \(([^)]*)\)", gunicorn):
        found |= set(re.findall(r'"([A-Z][A-Z0-9_]*)"', names))
    return found


def test_the_configuration_reference_lists_every_variable_the_code_reads(site: Path) -> None:
    read = variables_the_code_reads()
    assert {"DATABASE_URL", "WEB_CONCURRENCY", "GUNICORN_BIND", "PROMETHEUS_MULTIPROC_DIR"} <= read
    ids = parse(site / "configuration.html").ids
    assert sorted(name for name in read if name.lower() not in ids) == []


def test_the_configuration_reference_refuses_a_variable_env_example_does_not_explain(
    tmp_path: Path,
) -> None:
    generator = load_generator()
    for folder in ("config/settings", "deploy", "apps"):
        (tmp_path / folder).mkdir(parents=True)
    for name in ("manage.py", ".env.example", "config/env.py", "config/wsgi.py",
                 "deploy/gunicorn.conf.py"):  # fmt: skip
        shutil.copy(ROOT / name, tmp_path / name)
    for path in (ROOT / "config" / "settings").glob("*.py"):
        shutil.copy(path, tmp_path / "config" / "settings" / path.name)
    generator.configuration_markdown(tmp_path)  # complete as committed
    with (tmp_path / "config" / "settings" / "base.py").open("a") as settings:
        settings.write('\nNEW_KNOB = env_int("NEW_KNOB_SECONDS", 3)\n')
    with pytest.raises(generator.ReferenceIncomplete, match="NEW_KNOB_SECONDS"):
        generator.configuration_markdown(tmp_path)


@pytest.mark.parametrize("profile", ["keyscoped", "teampath"])
def test_the_api_reference_has_every_operation_and_schema(site: Path, profile: str) -> None:
    document = json.loads((ROOT / "tests" / "data" / "openapi" / f"{profile}.json").read_text())
    ids = parse(site / "api" / f"{profile}.html").ids

    def target(*parts: str) -> str:  # as Sphinx writes a target's id
        return re.sub(r"[^a-z0-9]+", "-", "-".join(parts).lower())

    operations = {
        target(profile, "op", operation["operationId"])
        for methods in document["paths"].values()
        for operation in methods.values()
        if isinstance(operation, dict) and "operationId" in operation
    }
    schemas = {target(profile, "schema", name) for name in document["components"]["schemas"]}
    assert len(operations) >= 15
    assert sorted((operations | schemas) - ids) == []


def test_the_readme_stays_short_and_its_links_arrive(site: Path) -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) < 200
    commands = re.findall(r"^make \w+", readme, re.MULTILINE)
    assert commands[:2] == ["make run", "make test"]
    links = re.findall(r"\]\(([^)\s]+)\)", readme)
    assert links
    for link in links:
        if urlsplit(link).scheme:
            continue
        path, _, fragment = link.partition("#")
        assert (ROOT / path).exists(), link
        if path.startswith("docs/") and path.endswith(".md"):
            built = site / Path(path).relative_to("docs").with_suffix(".html")
            assert built.exists(), link
            assert not fragment or fragment in parse(built).ids, link
