import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from apps.receipts.models import MirrorEntry, MirrorHead

pytestmark = pytest.mark.django_db


def run(*args: str) -> list[str]:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue().splitlines()


@pytest.fixture
def mirrored(push, agent, approver_key):
    for _ in range(3):
        push(agent.receipt())
    suspended = agent.receipt()
    push(suspended)
    push(agent.approve_l1(suspended, approver_key), supersedes=suspended["content"]["action_hash"])


def test_it_passes_on_an_untouched_chain(cast, mirrored):
    result = json.loads(run("verify_chain", "acme")[-1])
    head = MirrorHead.objects.get(org=cast.acme)
    assert result == {"org": "acme", "size": 5, "head": head.head, "ok": True, "retired": 0,
                      "checked_against_archive": 0}  # fmt: skip


def test_it_passes_on_an_empty_chain(cast):
    assert json.loads(run("verify_chain", "globex")[-1])["size"] == 0


def test_it_names_the_first_seq_whose_stored_receipt_was_tampered(cast, mirrored):
    entry = MirrorEntry.objects.get(org=cast.acme, seq=2)
    MirrorEntry.objects.filter(pk=entry.pk).update(
        receipt=entry.receipt.replace("weather", "WEATHER")
    )
    with pytest.raises(CommandError, match=r"^seq 2: "):
        run("verify_chain", "acme")


def test_it_catches_a_rewritten_chain_hash(cast, mirrored):
    MirrorEntry.objects.filter(org=cast.acme, seq=3).update(chain_hash="ab" * 32)
    with pytest.raises(CommandError, match=r"^seq 3: chain_hash"):
        run("verify_chain", "acme")


def test_it_catches_a_deleted_entry(cast, mirrored):
    MirrorEntry.objects.filter(org=cast.acme, seq=4).update(superseded_by="")
    MirrorEntry.objects.filter(org=cast.acme, seq=2).delete()
    with pytest.raises(CommandError, match=r"^seq 3: .*gap"):
        run("verify_chain", "acme")


def test_it_catches_a_dropped_signature(cast, mirrored):
    entry = MirrorEntry.objects.get(org=cast.acme, seq=5)
    stored = json.loads(entry.receipt)
    stored["signatures"] = stored["signatures"][:1]
    stored["content"]["trust_level"] = "L1"
    MirrorEntry.objects.filter(pk=entry.pk).update(receipt=json.dumps(stored))
    with pytest.raises(CommandError, match=r"^seq 5: "):
        run("verify_chain", "acme")


def test_an_unknown_org_is_an_error():
    with pytest.raises(CommandError, match="no org"):
        run("verify_chain", "nobody")
