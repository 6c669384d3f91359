"""Mirror entries written straight to the tables (the push path is tested elsewhere)."""

from __future__ import annotations

from django.utils import timezone

from apps.receipts.models import MirrorEntry, MirrorHead
from apps.tenancy.models import Org
from apps.transparency.models import OrgLog


def mirror(org: Org, action_hashes: list[str]) -> None:
    """Append entries with these action hashes to the org's mirror, after what it holds."""
    head, _ = MirrorHead.objects.get_or_create(org=org)
    now = timezone.now()
    MirrorEntry.objects.bulk_create(
        [
            MirrorEntry(
                org=org,
                seq=head.size + offset + 1,
                action_hash=action_hash,
                receipt="{}",
                receipt_digest="0" * 64,
                trust_level="L0",
                prev_chain_hash="0" * 64,
                chain_hash="0" * 64,
                received_at=now,
                link_hash="0" * 64,
            )
            for offset, action_hash in enumerate(action_hashes)
        ]
    )
    head.size += len(action_hashes)
    head.save(update_fields=["size"])


def set_log_id(org: Org, log_id: str) -> None:
    OrgLog.objects.filter(org=org).update(log_id=log_id)
