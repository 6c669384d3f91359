"""The per-org receipt mirror: an append-only, hash-chained list of verified receipts.

``MirrorHead`` holds each org's append position and chain head; appends lock that one row,
so ``seq`` is gapless and never reused, and the chain is computed under the lock.
``MirrorEntry`` rows are never updated except for ``superseded_by`` (outside the hash).
"""

from __future__ import annotations

from typing import Any

from django.db import models

from apps.receipts.mirror_chain import EMPTY_CHAIN_HEAD
from apps.tenancy.models import ApiKey, Org


class LookupText(models.CharField):  # type: ignore[type-arg]
    """A lookup column the console searches by prefix: in the "C" collation on PostgreSQL,
    so that a btree on it orders by bytes and a prefix is a range of the index whatever the
    database's collation (a linguistic collation orders "a-b" between "ab" and "ac"). SQLite
    compares bytes already."""

    def db_parameters(self, connection: Any) -> dict[str, Any]:
        parameters = super().db_parameters(connection)
        if connection.vendor == "postgresql":
            parameters["collation"] = "C"
        return parameters


class TrustLevel(models.TextChoices):
    L0 = "L0", "L0 (operator only)"
    L1 = "L1", "L1 (human approved)"


class MirrorHead(models.Model):
    """One row per org: the last ``seq`` and ``chain_hash``, and the month's append count.

    The monthly counter lives here (not a COUNT over entries) so the quota check is O(1)
    inside the append lock and exact under concurrency.
    """

    org = models.OneToOneField(Org, on_delete=models.CASCADE, primary_key=True, related_name="+")
    size = models.BigIntegerField(default=0)
    head = models.CharField(max_length=64, default=EMPTY_CHAIN_HEAD)
    month = models.CharField(max_length=7, default="")  # "YYYY-MM" (UTC) of month_count
    month_count = models.BigIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.org_id}: {self.size} entries"


class MirrorEntry(models.Model):
    # No separate FK indexes: (org, seq) and (org, action_hash) lead with org, and API keys
    # are revoked, never deleted. Fewer indexes make every append cheaper.
    org = models.ForeignKey(
        Org, on_delete=models.CASCADE, related_name="mirror_entries", db_index=False
    )
    seq = models.BigIntegerField()
    action_hash = models.CharField(max_length=64)
    # The receipt as stored: JCS text of the verified, normalized envelope (server.md §1).
    receipt = models.TextField()
    receipt_digest = models.CharField(max_length=64)
    kind = models.CharField(max_length=32, default="action")
    # The level the service derived (server.md §1); the receipt's own claim where it differs.
    trust_level = models.CharField(max_length=2, choices=TrustLevel.choices)
    claimed_trust_level = models.CharField(max_length=2, blank=True, default="")
    supersedes_action_hash = models.CharField(max_length=64, blank=True, default="")
    superseded_by = models.CharField(max_length=64, blank=True, default="")
    prev_chain_hash = models.CharField(max_length=64)
    chain_hash = models.CharField(max_length=64)
    received_at = models.DateTimeField()
    api_key = models.ForeignKey(
        ApiKey, on_delete=models.PROTECT, null=True, blank=True, related_name="+", db_index=False
    )
    # Denormalized from the receipt for lookups (session continuity, console search).
    session_id = models.CharField(max_length=200, blank=True, default="")
    session_seq = models.BigIntegerField(null=True, blank=True)
    link_hash = models.CharField(max_length=64)
    operator_key = models.CharField(max_length=64, blank=True, default="")
    agent_identity = LookupText(max_length=200, blank=True, default="")
    workflow = LookupText(max_length=200, blank=True, default="")
    verb = models.CharField(max_length=32, blank=True, default="")
    decision_path = models.CharField(max_length=32, blank=True, default="")
    rule_id = LookupText(max_length=200, blank=True, default="")
    # The receipt's action.tool_name. Its database default serves rows written before the
    # column (and loaders that name no tool); every push route stores it.
    tool_name = LookupText(max_length=200, blank=True, default="", db_default="")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["org", "seq"], name="mirror_entry_org_seq"),
            models.UniqueConstraint(fields=["org", "action_hash"], name="mirror_entry_org_hash"),
        ]
        indexes = [
            models.Index(fields=["org", "session_id", "session_seq"], name="mirror_entry_session"),
            models.Index(fields=["org", "received_at"], name="mirror_entry_received"),
            # The console's search (apps.receipts.search): an exact value or a prefix of it,
            # newest first, each a range of one index ending in seq, so a page reads no more
            # entries than it shows. Four indexes each append maintains: nothing else is
            # searched.
            models.Index(fields=["org", "tool_name", "seq"], name="mirror_entry_tool"),
            models.Index(fields=["org", "workflow", "seq"], name="mirror_entry_workflow"),
            models.Index(fields=["org", "rule_id", "seq"], name="mirror_entry_rule"),
            models.Index(fields=["org", "agent_identity", "seq"], name="mirror_entry_agent"),
        ]
        # Never order through a relation: lookups on the push path stay single-table.
        ordering = ["-seq"]
        verbose_name = "mirrored receipt"

    def __str__(self) -> str:
        return f"{self.org_id}#{self.seq} {self.action_hash[:12]}…"


class RefusalCount(models.Model):
    """Refused pushes per org, day (UTC) and verdict kind: what the mirror cannot derive
    from its own rows. Counted by :func:`apps.receipts.services.refusals_record`."""

    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="+", db_index=False)
    day = models.DateField()
    kind = models.CharField(max_length=64)  # the verdict kind (Malformed, BadSignature, ...)
    count = models.PositiveBigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["org", "day", "kind"], name="refusal_org_day_kind")
        ]

    def __str__(self) -> str:
        return f"{self.org_id} {self.day} {self.kind}: {self.count}"
