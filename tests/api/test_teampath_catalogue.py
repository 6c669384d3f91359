"""The team-path error catalogue is generated from the API floor's rows over the error
classes, and the document and the OpenAPI enum say exactly what the code answers."""

from __future__ import annotations

from io import StringIO

from django.core.management import call_command
from django.utils.module_loading import autodiscover_modules

from apps.api.catalogue import DOMAIN_ROWS, catalogue_markdown, teampath_catalogue
from apps.api.management.commands.teampath_errors import DOC, documented_catalogue
from apps.api.openapi import TEAMPATH_ERROR_CODES
from apps.common.errors import DomainError


def test_the_document_holds_the_generated_catalogue() -> None:
    # On failure: python manage.py teampath_errors --write
    assert documented_catalogue(DOC.read_text()) == catalogue_markdown()


def test_the_openapi_error_enum_names_every_catalogued_code() -> None:
    assert sorted(TEAMPATH_ERROR_CODES) == sorted({row.code for row in teampath_catalogue()})


def test_each_code_has_one_status() -> None:
    statuses: dict[str, set[int]] = {}
    for row in teampath_catalogue():
        statuses.setdefault(row.code, set()).add(row.status)
    assert {code: s for code, s in statuses.items() if len(s) > 1} == {}


def test_the_command_prints_the_catalogue() -> None:
    out = StringIO()
    call_command("teampath_errors", stdout=out)
    assert "| 410 | `approval_expired` |" in out.getvalue()
    assert "| 429 | `quota_exceeded` |" in out.getvalue()


def test_domain_errors_carry_no_catalogue_prose() -> None:
    """The domain floors' errors say only their status and code; the catalogue says the rest."""
    autodiscover_modules("errors")
    carrying = [
        f"{cls.__module__}.{cls.__qualname__}"
        for cls in _all_subclasses(DomainError)
        if {"teampath_when", "teampath_routes"} & set(vars(cls))
    ]
    assert carrying == []
    assert {cls.code for cls in DOMAIN_ROWS} <= set(TEAMPATH_ERROR_CODES)


def _all_subclasses(cls: type[DomainError]) -> list[type[DomainError]]:
    return [sub for direct in cls.__subclasses__() for sub in (direct, *_all_subclasses(direct))]
