"""Evidence exports in the background: the request records a job and answers 202 with its
link; a worker builds the tar (apps.audit.evidence, constant memory) and streams it into
the default storage; the link answers the job's state, and the file once it is ready."""

from __future__ import annotations

import hashlib
import secrets
import tempfile

from django.contrib.auth.models import User
from django.core.files import File
from django.core.files.storage import default_storage
from django.db import transaction
from django.http import FileResponse
from django.utils import timezone

from apps.audit.evidence import EvidenceWindow, evidence_export
from apps.common.errors import NotFound
from apps.events import tasks
from apps.events.models import EvidenceExportJob, ExportStatus
from apps.tenancy.audit_trail import Actor
from apps.tenancy.models import Org

EXPORT_ID_PREFIX = "exp_"


def evidence_export_request(
    *, org: Org, window: EvidenceWindow, requested_by: User | None = None
) -> EvidenceExportJob:
    with transaction.atomic():
        job = EvidenceExportJob.objects.create(
            org=org,
            export_id=EXPORT_ID_PREFIX + secrets.token_urlsafe(18),
            requested_by=requested_by if requested_by and requested_by.pk else None,
            window_from=window.start,
            window_to=window.end,
        )
        tasks.enqueue(tasks.build_evidence_export, job.pk)
    return job


def evidence_export_job(*, org: Org, export_id: str) -> EvidenceExportJob:
    job = EvidenceExportJob.objects.filter(org=org, export_id=export_id).first()
    if job is None:
        raise NotFound(f"no evidence export {export_id!r} in this org")
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
            name = default_storage.save(
                f"evidence-exports/{job.org.slug}/{job.export_id}.tar", File(spool)
            )
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


def export_file_response(job: EvidenceExportJob) -> FileResponse:
    """The finished export's file, as a download (the API and the console both serve it)."""
    response = FileResponse(
        default_storage.open(job.file_name, "rb"),
        as_attachment=True,
        filename=f"evidence-{job.org.slug}-{job.export_id}.tar",
        content_type="application/x-tar",
    )
    return response
