"""Finished evidence exports past EVIDENCE_EXPORT_RETENTION_DAYS are deleted (file through
the storage, then row) in bounded batches, except the ready ones an active legal hold
covers; unfinished ones are never touched."""

from __future__ import annotations

from datetime import date, timedelta

import pytest
from django.utils import timezone

from apps.audit.evidence import EvidenceWindow
from apps.audit.exports import evidence_export_build, evidence_exports_prune
from apps.audit.holds import legal_hold_release, legal_hold_set
from apps.audit.models import EvidenceExportJob, ExportStatus, HoldScope
from apps.common.scheduling import schedule

pytestmark = pytest.mark.django_db

ALL_TIME = EvidenceWindow(None, None)


@pytest.fixture
def storage(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path
    settings.EVIDENCE_EXPORT_RETENTION_DAYS = 30
    settings.RETENTION_PRUNE_BATCH = 500
    settings.RETENTION_PRUNE_BATCHES_PER_RUN = 20
    return tmp_path


def export(org, *, days_ago: int, window: EvidenceWindow = ALL_TIME, status=ExportStatus.READY):
    """An export built for real (its file in the storage), finished ``days_ago``."""
    job = EvidenceExportJob.objects.create(
        org=org, export_id=f"exp_{org.slug}_{EvidenceExportJob.objects.count()}",
        window_from=window.start, window_to=window.end,
    )  # fmt: skip
    if status == ExportStatus.READY:
        evidence_export_build(job_pk=job.pk)
    elif status == ExportStatus.FAILED:
        job.status, job.error = ExportStatus.FAILED, "Boom"
        job.save()
    finished = timezone.now() - timedelta(days=days_ago) if status in (
        ExportStatus.READY, ExportStatus.FAILED) else None  # fmt: skip
    EvidenceExportJob.objects.filter(pk=job.pk).update(finished_at=finished)
    job.refresh_from_db()
    return job


def kept(*jobs) -> list[str]:
    return sorted(
        EvidenceExportJob.objects.filter(pk__in=[job.pk for job in jobs]).values_list(
            "export_id", flat=True
        )
    )


def test_expired_finished_exports_go_with_their_files_and_the_rest_stays(cast, storage) -> None:
    old = export(cast.acme, days_ago=31)
    old_failed = export(cast.acme, days_ago=40, status=ExportStatus.FAILED)
    recent = export(cast.acme, days_ago=29)
    running = export(cast.acme, days_ago=90, status=ExportStatus.RUNNING)
    EvidenceExportJob.objects.filter(pk=running.pk).update(
        created_at=timezone.now() - timedelta(days=90)
    )
    assert (storage / old.file_name).exists()

    assert evidence_exports_prune() == 2

    assert not (storage / old.file_name).exists()
    assert (storage / recent.file_name).exists()
    assert kept(old, old_failed, recent, running) == sorted([recent.export_id, running.export_id])
    assert evidence_exports_prune() == 0


def test_a_run_deletes_in_bounded_batches_and_the_next_run_goes_on(cast, storage, settings):
    settings.RETENTION_PRUNE_BATCH = 2
    settings.RETENTION_PRUNE_BATCHES_PER_RUN = 2
    jobs = [export(cast.acme, days_ago=31 + n, status=ExportStatus.FAILED) for n in range(5)]
    assert evidence_exports_prune() == 4
    # The oldest went first: the newest of the five is what is left.
    assert kept(*jobs) == [jobs[0].export_id]
    assert evidence_exports_prune() == 1
    assert kept(*jobs) == []


def test_zero_days_keeps_every_export(cast, storage, settings) -> None:
    settings.EVIDENCE_EXPORT_RETENTION_DAYS = 0
    job = export(cast.acme, days_ago=3650)
    assert evidence_exports_prune() == 0
    assert kept(job) == [job.export_id]


def test_an_org_wide_hold_keeps_the_orgs_ready_exports_until_it_is_released(cast, storage) -> None:
    held = export(cast.acme, days_ago=31)
    failed = export(cast.acme, days_ago=31, status=ExportStatus.FAILED)
    theirs = export(cast.globex, days_ago=31)
    hold = legal_hold_set(org=cast.acme, scope=HoldScope.ORG, reason="Case 12-A")

    assert evidence_exports_prune() == 2  # globex's, and acme's failed one (no file to keep)
    assert kept(held, failed, theirs) == [held.export_id]
    assert (storage / held.file_name).exists()

    legal_hold_release(hold=hold, reason="Case closed")
    assert evidence_exports_prune() == 1
    assert kept(held) == []
    assert not (storage / held.file_name).exists()


def test_a_range_hold_keeps_only_the_exports_whose_window_it_overlaps(cast, storage) -> None:
    march = export(cast.acme, days_ago=31, window=EvidenceWindow(date(2026, 3, 1),
                                                                  date(2026, 3, 31)))  # fmt: skip
    may = export(cast.acme, days_ago=31, window=EvidenceWindow(date(2026, 5, 1),
                                                                date(2026, 5, 31)))  # fmt: skip
    since_april = export(cast.acme, days_ago=31, window=EvidenceWindow(date(2026, 4, 1), None))
    legal_hold_set(org=cast.acme, scope=HoldScope.RANGE, reason="Q1 audit",
                   range_start=date(2026, 1, 1), range_end=date(2026, 3, 10))  # fmt: skip
    assert evidence_exports_prune() == 2
    assert kept(march, may, since_april) == [march.export_id]


def test_an_export_with_no_end_is_not_held_by_a_range_after_it_was_built(cast, storage) -> None:
    built = export(cast.acme, days_ago=31)  # everything up to 31 days ago
    legal_hold_set(org=cast.acme, scope=HoldScope.RANGE, reason="From now on",
                   range_start=timezone.now().date())  # fmt: skip
    assert evidence_exports_prune() == 1
    assert kept(built) == []


def test_held_exports_never_stop_a_run_from_reaching_the_others(cast, storage, settings):
    settings.RETENTION_PRUNE_BATCH = 1
    settings.RETENTION_PRUNE_BATCHES_PER_RUN = 3
    held = [export(cast.acme, days_ago=40 + n) for n in range(2)]  # the oldest
    free = export(cast.globex, days_ago=35)
    legal_hold_set(org=cast.acme, scope=HoldScope.ORG, reason="Case")
    assert evidence_exports_prune() == 1
    assert kept(*held, free) == sorted(job.export_id for job in held)


def test_the_prune_is_a_periodic_task_of_the_audit_app(settings) -> None:
    names = {periodic.name: periodic for periodic in schedule()}
    periodic = names["prune_evidence_exports"]
    assert periodic.work.module_path == "apps.audit.tasks.prune_evidence_exports"
    settings.RETENTION_PRUNE_SECONDS = 600
    assert periodic.every() == 600
    assert names["prune_delivery_log"].work.module_path == "apps.events.tasks.prune_delivery_log"
