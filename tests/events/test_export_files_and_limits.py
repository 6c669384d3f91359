"""Background evidence exports: their files are the org's evidence, so they are written
0600 in folders 0700 whatever the process umask; and an org has at most
``EVIDENCE_EXPORTS_PER_ORG`` of them queued or running, checked under the org's row lock so
two simultaneous requests cannot both slip past it (409 in the profile's error body)."""

from __future__ import annotations

import os
import stat
import threading
import time
from collections.abc import Iterator
from http import HTTPStatus
from pathlib import Path

import pytest
from django.db import connection, connections, transaction
from django.test import Client

from apps.audit.evidence import EvidenceWindow
from apps.audit.exports import ExportsBusy, evidence_export_build, evidence_export_request
from apps.audit.models import EvidenceExportJob, ExportStatus
from apps.common.errors import DomainError
from tests.receipts.factories import Agent

ALL_TIME = EvidenceWindow(None, None)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def open_umask() -> Iterator[None]:
    """The loosest umask a process could run under: the modes must not come from it."""
    previous = os.umask(0)
    yield
    os.umask(previous)


@pytest.mark.django_db
def test_export_files_are_0600_in_folders_0700_whatever_the_umask(
    cast, push, settings, tmp_path, open_umask
) -> None:
    settings.MEDIA_ROOT = tmp_path
    assert push(Agent().receipt()).status_code == HTTPStatus.CREATED
    job = evidence_export_request(org=cast.acme, window=ALL_TIME)
    name = evidence_export_build(job_pk=job.pk)
    stored = tmp_path / name
    assert stored.stat().st_size > 0
    assert mode(stored) == 0o600
    assert mode(stored.parent) == 0o700  # evidence-exports/acme
    assert mode(stored.parent.parent) == 0o700  # evidence-exports
    assert stored.parent.parent.parent == tmp_path


@pytest.mark.django_db
def test_a_folder_left_open_by_an_earlier_version_is_closed(cast, settings, tmp_path) -> None:
    settings.MEDIA_ROOT = tmp_path
    folder = tmp_path / "evidence-exports" / "acme"
    folder.mkdir(parents=True, mode=0o755)
    folder.chmod(0o755)
    job = evidence_export_request(org=cast.acme, window=ALL_TIME)
    name = evidence_export_build(job_pk=job.pk)
    assert (mode(folder), mode(folder.parent), mode(tmp_path / name)) == (0o700, 0o700, 0o600)


@pytest.mark.django_db
def test_past_the_orgs_limit_a_request_is_409_and_nothing_is_queued(
    cast, dashboard, settings
) -> None:
    settings.EVIDENCE_EXPORTS_PER_ORG = 2
    client = dashboard("auditor")
    for _ in range(2):
        assert client.post("/v1/evidence/exports", {}, format="json").status_code == 202
    refused = client.post("/v1/evidence/exports", {}, format="json")
    assert refused.status_code == HTTPStatus.CONFLICT
    assert set(refused.json()) == {"detail"}
    assert "2 evidence exports queued or running" in refused.json()["detail"]
    assert EvidenceExportJob.objects.filter(org=cast.acme).count() == 2
    # Another org has its own limit; a finished export frees a place.
    evidence_export_request(org=cast.globex, window=ALL_TIME)
    first = EvidenceExportJob.objects.filter(org=cast.acme).first()
    assert first is not None
    EvidenceExportJob.objects.filter(pk=first.pk).update(status=ExportStatus.RUNNING)
    assert client.post("/v1/evidence/exports", {}, format="json").status_code == 409
    EvidenceExportJob.objects.filter(pk=first.pk).update(status=ExportStatus.FAILED)
    assert client.post("/v1/evidence/exports", {}, format="json").status_code == 202


def test_the_openapi_description_documents_the_409() -> None:
    from apps.api.openapi import profile_document

    route = profile_document("keyscoped")["paths"]["/v1/evidence/exports"]["post"]
    assert "409" in route["responses"]
    assert "EVIDENCE_EXPORTS_PER_ORG" in route["description"]


@pytest.mark.django_db
def test_the_console_shows_the_refusal_and_queues_nothing(cast, settings) -> None:
    settings.EVIDENCE_EXPORTS_PER_ORG = 1
    evidence_export_request(org=cast.acme, window=ALL_TIME)
    client = Client()
    assert client.login(username="acme-auditor", password="pw-auditor")
    page = client.post(
        "/admin/audit/evidenceexportjob/add/",
        {"org": cast.acme.pk, "window_from": "", "window_to": ""},
        follow=True,
    )
    shown = [str(message) for message in page.context["messages"]]
    assert any("1 evidence export queued or running" in message for message in shown), shown
    assert EvidenceExportJob.objects.filter(org=cast.acme).count() == 1


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_two_simultaneous_requests_cannot_both_pass_the_limit(cast, settings) -> None:
    """The first request holds its transaction open, its job written but not committed,
    until the second is either waiting for the org's row or done: a check without the lock
    would count no job and let both through."""
    settings.EVIDENCE_EXPORTS_PER_ORG = 1
    first_written, second_done = threading.Event(), threading.Event()
    second_pid: list[int] = []
    outcomes: dict[str, str] = {}

    def second_waits_or_is_done() -> bool:
        with connections["default"].cursor() as cursor:
            cursor.execute(
                "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", [second_pid[0]]
            )
            row = cursor.fetchone()
        return second_done.is_set() or (row is not None and row[0] == "Lock")

    def first() -> None:
        try:
            with transaction.atomic():
                evidence_export_request(org=cast.acme, window=ALL_TIME)
                first_written.set()
                deadline = time.monotonic() + 60  # a bound, so a regression fails, never hangs
                while not second_pid or not second_waits_or_is_done():
                    assert time.monotonic() < deadline, (
                        "the second request neither waited nor ended"
                    )
                    time.sleep(0.01)
            outcomes["first"] = "queued"
        finally:
            connection.close()

    def second() -> None:
        try:
            first_written.wait()
            second_pid.append(connection.cursor().connection.info.backend_pid)
            evidence_export_request(org=cast.acme, window=ALL_TIME)
            outcomes["second"] = "queued"
        except DomainError as error:
            outcomes["second"] = type(error).__name__
        finally:
            second_done.set()
            connection.close()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert outcomes == {"first": "queued", "second": ExportsBusy.__name__}
    assert EvidenceExportJob.objects.filter(org=cast.acme).count() == 1
