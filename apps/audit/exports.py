"""Evidence exports in the background: the request records a job and answers 202 with its
link; a worker builds the tar (:mod:`apps.audit.evidence`, constant memory) and streams it into
the default storage; the link answers the job's state, and the file once it is ready.

An org has at most ``EVIDENCE_EXPORTS_PER_ORG`` exports queued or running (each one reads
the org's whole window and writes a file). On a local disk the files are written 0600 in
folders 0700, whatever the process umask: they are the org's evidence, for the service's
user only.

A finished export is kept ``EVIDENCE_EXPORT_RETENTION_DAYS`` after it finished, then
deleted by :func:`evidence_exports_prune` (a periodic task of this app): its file through
the storage, then its row. A ready export that an active legal hold covers (its window
holds receipts the hold covers: :func:`apps.audit.selectors.legal_holds_blocking`) is kept
until the hold is released; a failed one has no file, nothing for a hold to keep."""

from __future__ import annotations

import hashlib
import logging
import os
import secrets
import tempfile
from datetime import UTC, datetime, time, timedelta
from http import HTTPStatus
from pathlib import PurePosixPath
from typing import IO

from django.conf import settings
from django.contrib.auth.models import User
from django.core.files import File
from django.core.files.storage import FileSystemStorage, default_storage
from django.db import models, transaction
from django.http import FileResponse
from django.utils import timezone
from django_tasks import task
from django_tasks_db.models import DBTaskResult

from apps.audit.evidence import EvidenceWindow, evidence_export
from apps.audit.models import EvidenceExportJob, ExportStatus, LegalHold
from apps.audit.selectors import legal_holds_blocking
from apps.common.errors import DomainError, NotFound
from apps.common.tasks import enqueue
from apps.common.workers import READY, RUNNING, Reclaimed
from apps.tenancy.audit_trail import Actor
from apps.tenancy.models import Org

EXPORT_ID_PREFIX = "exp_"
EXPORTS_FOLDER = "evidence-exports"
FILE_MODE = 0o600
FOLDER_MODE = 0o700
IN_PROGRESS = (ExportStatus.PENDING, ExportStatus.RUNNING)
FINISHED = (ExportStatus.READY, ExportStatus.FAILED)

logger = logging.getLogger(__name__)


class ExportsBusy(DomainError):
    """The org has as many exports queued or running as it may (``EVIDENCE_EXPORTS_PER_ORG``).

    409, not 429: the request conflicts with the org's state, not with a rate; a place
    frees when one of those exports is ready or has failed, at no time the service could
    promise in the ``Retry-After`` that every 429 of the profile carries."""

    status = HTTPStatus.CONFLICT
    code = "conflict"


class ExportNotReady(DomainError):
    """The export's file was asked for before it is ready (queued, running or failed)."""

    status = HTTPStatus.CONFLICT
    code = "conflict"


def evidence_export_request(
    *, org: Org, window: EvidenceWindow, requested_by: User | None = None
) -> EvidenceExportJob:
    with transaction.atomic():
        # The org's row, locked: one org's requests are serialized, so the count below and
        # the job written after it are one step and two simultaneous requests cannot both
        # pass the limit.
        Org.objects.select_for_update().filter(pk=org.pk).values_list("pk", flat=True).first()
        limit = settings.EVIDENCE_EXPORTS_PER_ORG
        busy = EvidenceExportJob.objects.filter(org=org, status__in=IN_PROGRESS).count()
        if busy >= limit:
            exports = "export" if busy == 1 else "exports"
            raise ExportsBusy(
                f"{org} has {busy} evidence {exports} queued or running, the most it may "
                f"have at once ({limit}); request again once one is ready or has failed"
            )
        job = EvidenceExportJob.objects.create(
            org=org,
            export_id=EXPORT_ID_PREFIX + secrets.token_urlsafe(18),
            requested_by=requested_by if requested_by and requested_by.pk else None,
            window_from=window.start,
            window_to=window.end,
        )
        enqueue(build_evidence_export, job.pk)
    return job


def evidence_export_job(*, org: Org, export_id: str) -> EvidenceExportJob:
    job = EvidenceExportJob.objects.filter(org=org, export_id=export_id).first()
    if job is None:
        raise NotFound(f"no evidence export {export_id!r} in this org")
    return job


def export_is_ready(job: EvidenceExportJob) -> bool:
    """Whether the job's file can be downloaded: built and stored."""
    return job.status == ExportStatus.READY


def evidence_export_ready(*, org: Org, export_id: str) -> EvidenceExportJob:
    """The org's export with ``export_id``, whose file is ready to download (404 for no such
    export here, 409 while it is queued or running, or once it failed)."""
    job = evidence_export_job(org=org, export_id=export_id)
    if not export_is_ready(job):
        raise ExportNotReady(f"the export is {job.status}, not ready")
    return job


def evidence_export_build(*, job_pk: int) -> str:
    """Build the job's tar and store it: written chunk by chunk to a temporary file while
    hashed, then saved to the default storage (which copies in chunks)."""
    claimed = EvidenceExportJob.objects.filter(pk=job_pk, status=ExportStatus.PENDING).update(
        status=ExportStatus.RUNNING
    )
    if not claimed:
        return "not pending"
    job = EvidenceExportJob.objects.select_related("org", "requested_by").get(pk=job_pk)
    requester = job.requested_by
    # Built by the worker for whoever asked (API or console): recorded as theirs.
    actor = Actor(via="task", user=requester, name=requester.get_username() if requester else "")
    try:
        window = EvidenceWindow(job.window_from, job.window_to)
        digest = hashlib.sha256()
        size = 0
        with (
            evidence_export(org=job.org, window=window, actor=actor) as archive,
            tempfile.TemporaryFile() as spool,
        ):
            for chunk in archive:
                spool.write(chunk)
                digest.update(chunk)
                size += len(chunk)
            spool.seek(0)
            name = _store(f"{EXPORTS_FOLDER}/{job.org.slug}/{job.export_id}.tar", spool)
    except Exception as e:
        EvidenceExportJob.objects.filter(pk=job_pk).update(
            status=ExportStatus.FAILED,
            error=f"{type(e).__name__}"[:300],
            finished_at=timezone.now(),
        )
        raise
    EvidenceExportJob.objects.filter(pk=job_pk).update(
        status=ExportStatus.READY, file_name=name, size=size, sha256=digest.hexdigest(),
        finished_at=timezone.now(),
    )  # fmt: skip
    return name


@task()
def build_evidence_export(job_pk: int) -> str:
    return evidence_export_build(job_pk=job_pk)


# Where the build task was enqueued from before it moved here: rows an older process
# enqueued during an upgrade still name it (apps.events.tasks keeps an alias for one
# release), and the reclaim must see them as this job's task.
_BUILD_PATHS = (build_evidence_export.module_path, "apps.events.tasks.build_evidence_export")


def evidence_exports_settle(reclaimed: Reclaimed) -> None:
    """The worker reclaim's hook (apps.common.workers): an unfinished export is built only
    by its task; back to pending when its task was queued again (rebuilt from the start),
    failed with the reason when its task will not run again (a worker died before the
    build marked the job running, too)."""
    unfinished = (ExportStatus.PENDING, ExportStatus.RUNNING)
    for job_pk, status in EvidenceExportJob.objects.filter(status__in=unfinished).values_list(
        "pk", "status"
    ):
        states = set(
            DBTaskResult.objects.filter(
                task_path__in=_BUILD_PATHS, args_kwargs__args=[job_pk]
            ).values_list("status", flat=True)
        )
        if RUNNING in states or (READY in states and status == ExportStatus.PENDING):
            continue
        job = EvidenceExportJob.objects.filter(pk=job_pk, status=status)
        if READY in states:
            job.update(status=ExportStatus.PENDING)
            continue
        job.update(
            status=ExportStatus.FAILED,
            error="interrupted: the worker building it stopped; request a new export",
            finished_at=timezone.now(),
        )


def _store(name: str, spool: IO[bytes]) -> str:
    """Save the built tar under ``name`` in the default storage. On a local disk its folders
    are made (or closed, if an earlier version left them open) 0700 before the file is
    written, and the file is set 0600: by explicit modes, not the process umask."""
    local = isinstance(default_storage, FileSystemStorage)
    if local:
        folder = PurePosixPath(name).parent
        for depth in range(1, len(folder.parts) + 1):
            path = default_storage.path(str(PurePosixPath(*folder.parts[:depth])))
            os.makedirs(path, mode=FOLDER_MODE, exist_ok=True)
            os.chmod(path, FOLDER_MODE)
    stored = default_storage.save(name, File(spool))
    if local:
        os.chmod(default_storage.path(stored), FILE_MODE)
    return stored


def export_file_response(job: EvidenceExportJob) -> FileResponse:
    """The finished export's file, as a download (the API and the console both serve it)."""
    response = FileResponse(
        default_storage.open(job.file_name, "rb"),
        as_attachment=True,
        filename=f"evidence-{job.org.slug}-{job.export_id}.tar",
        content_type="application/x-tar",
    )
    return response


def export_received_span(job: EvidenceExportJob) -> tuple[datetime | None, datetime | None]:
    """The ``[start, end)`` of ``received_at`` an export's receipts can fall in: its window's
    days (UTC, inclusive), and with no ``to`` no later than when it was built."""
    start = datetime.combine(job.window_from, time.min, UTC) if job.window_from else None
    if job.window_to is not None:
        end: datetime | None = datetime.combine(job.window_to + timedelta(days=1), time.min, UTC)
    else:
        end = job.finished_at
    return start, end


def _held(job: EvidenceExportJob) -> bool:
    if job.status != ExportStatus.READY:
        return False  # no file: nothing of the org's evidence to keep
    start, end = export_received_span(job)
    return bool(legal_holds_blocking(job.org_id, start=start, end=end))


def _delete(job: EvidenceExportJob) -> bool:
    """The job's file, then (once the file is gone) its row; whether both went. A file the
    storage cannot delete keeps its row, so the next run tries again (logged)."""
    if job.file_name:
        try:
            default_storage.delete(job.file_name)  # a file already gone is no error
        except Exception:
            logger.exception("evidence export %s: its file could not be deleted", job.export_id)
            return False
    EvidenceExportJob.objects.filter(pk=job.pk).delete()
    return True


def evidence_exports_prune(*, now: datetime | None = None) -> int:
    """Delete the finished exports past ``EVIDENCE_EXPORT_RETENTION_DAYS`` (0: none), file
    then row, except those an active legal hold covers; how many were deleted.

    Bounded work per run, never a scan of the table: at most ``RETENTION_PRUNE_BATCH``
    rows per batch and ``RETENTION_PRUNE_BATCHES_PER_RUN`` batches, each found through
    the partial index of finished exports by ``finished_at`` (oldest first, by keyset).
    Exports of orgs with no active hold are deleted outright; an org with one (found
    through the index of active holds) has each expired export asked about. A kept
    export is passed by the keyset, so kept ones never stop the run from reaching others.
    """
    days = settings.EVIDENCE_EXPORT_RETENTION_DAYS
    if not days:
        return 0
    cutoff = (now or timezone.now()) - timedelta(days=days)
    held_orgs = set(
        LegalHold.objects.filter(released_at=None).values_list("org_id", flat=True).distinct()
    )
    expired = EvidenceExportJob.objects.filter(status__in=FINISHED, finished_at__lt=cutoff)
    deleted = 0
    after: tuple[datetime, int] | None = None
    for _ in range(settings.RETENTION_PRUNE_BATCHES_PER_RUN):
        page = expired
        if after is not None:
            page = page.filter(
                models.Q(finished_at__gt=after[0]) | models.Q(finished_at=after[0], pk__gt=after[1])
            )
        batch = list(
            page.order_by("finished_at", "pk").only(
                "pk", "org_id", "export_id", "status", "file_name", "window_from", "window_to",
                "finished_at",
            )[: settings.RETENTION_PRUNE_BATCH]
        )  # fmt: skip
        if not batch:
            break
        for job in batch:
            if job.org_id in held_orgs and _held(job):
                continue
            deleted += _delete(job)
        last = batch[-1]
        assert last.finished_at is not None  # finished exports only
        after = (last.finished_at, last.pk)
    return deleted
