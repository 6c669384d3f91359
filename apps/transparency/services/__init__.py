"""Writes of the transparency log (transparency.md §3, §4.5, §5.6, §9), one module per
concern: ``trees`` (extending org trees from the mirror), ``epochs`` (publishing the top
log's checkpoints), ``witnesses`` (witness keys and their cosignatures) and ``alerts`` (the
monitor's findings as events). Their public names are importable from here."""

from apps.transparency.services.alerts import transparency_alerts_emit
from apps.transparency.services.epochs import (
    EpochResult,
    transparency_publish_epoch,
    transparency_publish_every,
)
from apps.transparency.services.scope import every_org
from apps.transparency.services.trees import org_log_ensure, org_tree_extend, org_trees_extend
from apps.transparency.services.witnesses import (
    CosignatureResult,
    WitnessRegistration,
    cosignature_submit,
    witness_register,
)

__all__ = [
    "CosignatureResult",
    "EpochResult",
    "WitnessRegistration",
    "cosignature_submit",
    "every_org",
    "org_log_ensure",
    "org_tree_extend",
    "org_trees_extend",
    "transparency_alerts_emit",
    "transparency_publish_epoch",
    "transparency_publish_every",
    "witness_register",
]
