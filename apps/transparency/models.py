"""The transparency log's storage (transparency.md §2.5, §3, §4).

Org-scoped (row-level security): each org's log identity and stored tree (``OrgLog``) and
the perfect-subtree hashes of its tree (``OrgTreeNode``). Public, never updated once
published: the top log's leaves (one per published org head) and nodes, checkpoints,
witnesses and their cosignatures. Published rows do not follow an org's deletion.
"""

from __future__ import annotations

import base64
import os

from django.db import models

from apps.tenancy.models import Org
from apps.transparency.tree.merkle import EMPTY_ROOT


def new_log_id() -> str:
    """``olog_`` and 26 base32 characters of 16 random bytes: derived from nothing."""
    return "olog_" + base64.b32encode(os.urandom(16)).decode("ascii").rstrip("=").lower()


class OrgLog(models.Model):
    """Per org: its opaque log identifier, and its stored tree (size and root).

    ``tree_size`` moves in the same transaction as the nodes it completes, so a size read
    here is always backed by stored nodes (§2.5). ``published_size`` is the size of the
    org's last published head (0 before its first), moved by the epoch that publishes it.
    """

    org = models.OneToOneField(Org, on_delete=models.CASCADE, primary_key=True, related_name="+")
    log_id = models.CharField(max_length=31, unique=True, default=new_log_id, editable=False)
    tree_size = models.BigIntegerField(default=0)
    tree_root = models.BinaryField(max_length=32, default=EMPTY_ROOT)
    published_size = models.BigIntegerField(default=0)

    class Meta:
        verbose_name = "org log"

    def __str__(self) -> str:
        return f"{self.log_id} ({self.tree_size} entries)"


class OrgTreeNode(models.Model):
    """Node ``(level, index)`` of an org tree: MTH of leaves ``[index·2^level, (index+1)·2^level)``;
    level 0 holds the leaf hashes. Stored once, when its last leaf is appended."""

    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="+", db_index=False)
    level = models.SmallIntegerField()
    index = models.BigIntegerField()
    hash = models.BinaryField(max_length=32)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["org", "level", "index"], name="transparency_org_node_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.org_id} node ({self.level}, {self.index})"


class LogState(models.Model):
    """One row: the lock every epoch run takes, and the origin fixed by epoch 1."""

    id = models.SmallIntegerField(primary_key=True, default=1)
    origin = models.CharField(max_length=255, blank=True, default="")

    def __str__(self) -> str:
        return self.origin or "(no epoch yet)"


class TopLeaf(models.Model):
    """Top-log leaf ``index``: the org head ``(org_id, org_tree_size, org_root)`` an epoch
    published. Never updated or deleted."""

    index = models.BigIntegerField(primary_key=True)
    epoch = models.BigIntegerField()
    log_id = models.CharField(max_length=31)
    # The org the head is of, for the service's own reads (the org's tree nodes behind a
    # public org consistency proof); never served. Kept when the org goes (no cascade, no
    # constraint): published rows stay. Not named org_id: this table is public, not
    # org-scoped (no row-level security), and that column name marks org-scoped tables.
    org = models.ForeignKey(
        Org,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        db_column="head_org_id",
        null=True,
        related_name="+",
        db_index=False,
    )
    org_tree_size = models.BigIntegerField()
    org_root = models.BinaryField(max_length=32)
    leaf = models.BinaryField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["log_id", "org_tree_size"], name="transparency_top_leaf_head"
            )
        ]
        indexes = [
            models.Index(fields=["epoch"], name="transparency_top_leaf_epoch"),
            # An org's latest head below a checkpoint's size: the proof route's lookup.
            models.Index(fields=["org", "index"], name="transparency_top_leaf_org"),
        ]
        ordering = ["index"]

    def __str__(self) -> str:
        return f"#{self.index} {self.log_id}@{self.org_tree_size}"


class TopNode(models.Model):
    """Node ``(level, index)`` of the top tree (level 0: org-head leaf hashes)."""

    level = models.SmallIntegerField()
    index = models.BigIntegerField()
    hash = models.BinaryField(max_length=32)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["level", "index"], name="transparency_top_node_unique")
        ]

    def __str__(self) -> str:
        return f"top node ({self.level}, {self.index})"


class Checkpoint(models.Model):
    """Checkpoint ``epoch``: the top tree's size and root, and the body witnesses sign."""

    epoch = models.BigIntegerField(primary_key=True)
    size = models.BigIntegerField(unique=True)
    root = models.BinaryField(max_length=32)
    body = models.TextField()
    published_at = models.DateTimeField()

    class Meta:
        ordering = ["-epoch"]

    def __str__(self) -> str:
        return f"epoch {self.epoch}: size {self.size}"


class Witness(models.Model):
    """A registered witness key (§4.5). Only an active one's cosignatures are accepted."""

    name = models.CharField(max_length=255)
    public_key = models.BinaryField(max_length=32)
    key_id = models.CharField(max_length=8)
    vkey = models.CharField(max_length=400, unique=True)
    active = models.BooleanField(default=True)
    registered_at = models.DateTimeField(auto_now_add=True)
    deactivated_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["name", "key_id"]
        verbose_name_plural = "witnesses"

    def __str__(self) -> str:
        return self.vkey


class Cosignature(models.Model):
    """A witness key's accepted ``cosignature/v1`` line for one checkpoint (at most one)."""

    checkpoint = models.ForeignKey(
        Checkpoint, on_delete=models.PROTECT, related_name="cosignatures"
    )
    witness = models.ForeignKey(Witness, on_delete=models.PROTECT, related_name="cosignatures")
    timestamp = models.BigIntegerField()
    line = models.TextField()
    accepted_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["checkpoint", "witness"], name="transparency_cosignature_once"
            )
        ]

    def __str__(self) -> str:
        return f"{self.witness.name} on epoch {self.checkpoint_id}"
