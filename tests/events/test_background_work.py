"""Work moved onto the task engine: periodic scheduling (once per slot, whatever the
number of workers), approval expiry, background evidence exports, email opt-ins sent by a
worker, and the queue's age in /readyz and /metrics."""

from __future__ import annotations

import base64
import io
import json
import tarfile
from datetime import timedelta
from http import HTTPStatus

import pytest
from django.core import mail
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from apps.approvals.models import Approval
from apps.approvals.services import approval_open, approval_vote, approver_key_register
from apps.audit.models import EvidenceExportJob
from apps.common.models import PeriodicSlot
from apps.common.scheduling import enqueue_due
from apps.events.services import email_subscriptions_set
from tests.approvals.conftest import Approver, suspended_receipt
from tests.approvals.test_approval_flows import SCOPE
from tests.events.conftest import work
from tests.receipts.factories import Agent


def test_each_periodic_task_is_enqueued_once_per_slot(db, settings) -> None:
    settings.APPROVAL_SWEEP_SECONDS = 60
    settings.TRANSPARENCY_EPOCH_SECONDS = 60
    settings.ROLLUP_FOLD_SECONDS = 60
    settings.TASK_WORKER_LEASE_SECONDS = 60
    settings.POLICY_STALE_AGENT_CHECK_SECONDS = 60
    first = enqueue_due(now=1_000_000.0)
    again = enqueue_due(now=1_000_010.0)  # same slots: another worker, or the next tick
    later = enqueue_due(now=1_000_070.0)  # the next minute

    every_minute = [
        "check_stale_agents", "escalate_approvals", "fold_receipt_rollups",
        "publish_transparency_epoch",
        "reclaim_tasks", "sweep_approvals", "sweep_deliveries",
    ]  # fmt: skip
    hourly = ["prune_task_results", "prune_delivery_log", "prune_evidence_exports",
              "prune_policy_replays", "sweep_receipt_retention"]  # fmt: skip
    assert sorted(first) == sorted([*every_minute, *hourly])
    assert again == []
    assert sorted(later) == every_minute
    paths = list(DBTaskResult.objects.values_list("task_path", flat=True))
    assert paths.count("apps.approvals.tasks.sweep_approvals") == 2
    assert PeriodicSlot.objects.count() == len(every_minute) * 2 + len(hourly)


def test_a_periodic_task_set_to_zero_seconds_is_off(db, settings) -> None:
    settings.TRANSPARENCY_EPOCH_SECONDS = 0
    assert "publish_transparency_epoch" not in enqueue_due(now=1_000_000.0)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_the_worker_publishes_the_transparency_logs_epochs(cast, push) -> None:
    from apps.transparency.models import Checkpoint

    for receipt in Agent().session("sess-log", 3):
        assert push(receipt).status_code == HTTPStatus.CREATED
    enqueue_due()
    work(lambda: Checkpoint.objects.exists())
    checkpoint = Checkpoint.objects.get()
    assert checkpoint.size == 1  # one org grew: one org-head leaf
    result = DBTaskResult.objects.get(
        task_path="apps.transparency.tasks.publish_transparency_epoch"
    )
    assert (result.status, result.return_value) == ("SUCCESSFUL", 1)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_the_worker_applies_approval_expiry(cast) -> None:
    content = suspended_receipt(Agent())["content"]
    approval_open(org=cast.acme, action_hash=content["action_hash"], rule_id=SCOPE,
                  expires_at=timezone.now() - timedelta(seconds=1))  # fmt: skip
    enqueue_due()
    work(lambda: not Approval.objects.filter(status="pending").exists())
    assert Approval.objects.get().status == "expired"
    result = DBTaskResult.objects.get(task_path="apps.approvals.tasks.sweep_approvals")
    assert (result.status, result.return_value) == ("SUCCESSFUL", 1)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_members_who_opted_in_get_approval_emails(cast) -> None:
    from django.contrib.auth import get_user_model

    users = get_user_model().objects
    for name in ("acme-viewer", "acme-owner"):
        users.filter(username=name).update(email=f"{name}@acme.example")
    viewer = users.get(username="acme-viewer")
    email_subscriptions_set(
        org=cast.acme, user=viewer, event_types=["approval.waiting_for_approvers"]
    )
    alice = Approver("alice")
    approver_key_register(org=cast.acme, public_key=alice.public, key_id="alice")
    content = suspended_receipt(Agent())["content"]
    opened = approval_open(org=cast.acme, action_hash=content["action_hash"], rule_id=SCOPE,
                           suspended_content=content).approval  # fmt: skip
    token = base64.b64decode(alice.token(content, scope=SCOPE))
    approval_vote(org=cast.acme, action_hash=content["action_hash"], token=token)

    work(lambda: len(mail.outbox) >= 1, timeout=10)

    [message] = mail.outbox  # waiting only; nobody opted in to the other types
    assert message.to == ["acme-viewer@acme.example"]
    assert opened.approval_id in message.subject
    assert f"/approve/{opened.approval_id}" in message.body
    assert content["action_hash"] in message.body


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_an_evidence_export_is_built_in_the_background(
    cast, dashboard, push, settings, tmp_path
) -> None:
    settings.MEDIA_ROOT = tmp_path
    agent = Agent()
    for _ in range(3):
        assert push(agent.receipt()).status_code == HTTPStatus.CREATED
    client = dashboard("auditor")

    response = client.post("/v1/evidence/exports", {}, format="json")
    assert response.status_code == HTTPStatus.ACCEPTED
    job = response.json()
    assert job["status"] == "pending"
    assert job["download_url"] is None
    assert response["Location"] == job["url"]
    assert client.get(job["url"]).json()["status"] == "pending"
    assert client.get(job["url"] + "/download").status_code == HTTPStatus.CONFLICT

    work(lambda: EvidenceExportJob.objects.filter(status="ready").exists())

    ready = client.get(job["url"]).json()
    assert ready["status"] == "ready"
    assert ready["size"] > 0
    download = client.get(ready["download_url"])
    assert download.status_code == HTTPStatus.OK
    archive = b"".join(download.streaming_content)
    assert len(archive) == ready["size"]
    import hashlib

    assert hashlib.sha256(archive).hexdigest() == ready["sha256"]
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        names = [member.name.split("/", 1)[1] for member in tar.getmembers()]
        manifest = json.loads(tar.extractfile(tar.getmembers()[0]).read())  # type: ignore[union-attr]
    assert "receipts.jsonl" in names
    assert manifest["receipts"] == 3
    assert (tmp_path / EvidenceExportJob.objects.get().file_name).stat().st_size == ready["size"]
    # A viewer may not export.
    assert dashboard("viewer").get(job["url"]).status_code == HTTPStatus.FORBIDDEN
    assert dashboard("viewer").post("/v1/evidence/exports", {}, format="json").status_code == 403


def test_an_export_of_another_org_is_404(cast, dashboard) -> None:
    from apps.audit.evidence import EvidenceWindow
    from apps.audit.exports import evidence_export_request

    job = evidence_export_request(org=cast.globex, window=EvidenceWindow(None, None))
    assert dashboard("owner").get(f"/v1/evidence/exports/{job.export_id}").status_code == 404


@pytest.mark.parametrize("body", [{"from": "2026-13-01"}, {"from": 1}, {"extra": "x"}, [1]])
def test_bad_export_requests_are_422(cast, dashboard, body) -> None:
    response = dashboard("auditor").post("/v1/evidence/exports", body, format="json")
    assert response.status_code == HTTPStatus.UNPROCESSABLE_ENTITY
    assert not EvidenceExportJob.objects.exists()


def test_readyz_and_metrics_show_the_queue_age(db, api_client, settings) -> None:
    assert api_client.get("/readyz").json()["task_queue"] == {
        "ready": 0, "oldest_ready_seconds": None,
    }  # fmt: skip
    from apps.common.tasks import enqueue
    from apps.events.tasks import sweep_deliveries

    enqueue(sweep_deliveries)
    DBTaskResult.objects.update(enqueued_at=timezone.now() - timedelta(seconds=90))
    state = api_client.get("/readyz").json()["task_queue"]
    assert state["ready"] == 1
    assert 89 <= state["oldest_ready_seconds"] < 200

    settings.METRICS_ENABLED = True
    text = api_client.get("/metrics").content.decode()
    assert "mirror_task_queue_ready 1" in text
    assert "mirror_task_queue_oldest_ready_seconds 9" in text


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_committed_enqueue_wakes_listening_workers_and_a_rolled_back_one_does_not() -> None:
    from django.db import connections, transaction

    from apps.common import tasks
    from apps.events.tasks import sweep_deliveries

    listener = connections.create_connection("default")
    listener.ensure_connection()
    listener.connection.autocommit = True
    listener.connection.execute(f"LISTEN {tasks.WAKE_CHANNEL}")

    def woken() -> int:
        return len(list(listener.connection.notifies(timeout=0.5, stop_after=1)))

    def enqueue_then_fail() -> None:
        with transaction.atomic():
            tasks.enqueue(sweep_deliveries)
            raise RuntimeError("rolled back")

    try:
        with pytest.raises(RuntimeError):
            enqueue_then_fail()
        assert woken() == 0
        deferred = timezone.now() + timedelta(hours=1)
        tasks.enqueue(sweep_deliveries, run_after=deferred)
        assert woken() == 0  # a deferred task wakes nobody: it is not due
        tasks.enqueue(sweep_deliveries)
        assert woken() == 1
    finally:
        listener.close()
