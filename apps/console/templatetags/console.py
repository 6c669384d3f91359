"""Template helpers of the console's admin pages: the words a breadcrumb shows for a
record, and what an empty list says."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django import template
from django.contrib import admin
from django.db.models import Model
from django.utils.text import capfirst

register = template.Library()


@register.filter
def crumb(value: Any) -> str:
    """A record's name in the page's header: its admin's ``breadcrumb(obj)`` when it has
    one (words, not the model's identifier string), else its text as it is (an id is not
    capitalised into something else)."""
    if isinstance(value, Model):
        model_admin = admin.site._registry.get(type(value))
        named = getattr(model_admin, "breadcrumb", None)
        return str(named(value)) if callable(named) else str(value)
    return str(capfirst(str(value)))


@dataclass(frozen=True)
class EmptyState:
    what: str  # what the thing is, in a sentence
    command: str = ""  # the command (or call) that creates one, when the console does not


# What each list holds and how its first row comes to be, by model label.
EMPTY_STATES = {
    "receipts.mirrorentry": EmptyState(
        "Mirrored receipts are the signed records of what your agents did, pushed by the "
        "heso SDK with an API key.",
        'heso.cloud.configure(api_key="hk_…", endpoint="…"); heso.cloud.push_receipt(receipt)',
    ),
    "approvals.approval": EmptyState(
        "An approval opens when an agent's action is routed to a human: the SDK pushes the "
        "suspended receipt, and approvers sign here.",
        "heso.cloud.push_receipt(suspended_receipt)",
    ),
    "approvals.approverkey": EmptyState(
        "Approver keys are the Ed25519 keys whose signatures count as a human's approval. "
        "Each approver enrolls their own device at /approve/; confirm it here.",
        "manage.py register_approver_key <org> <public key> --label <device>",
    ),
    "policy.policyversion": EmptyState(
        "A policy version is one deployed policy text; without one, every action goes to a human.",
        "manage.py deploy_policy <org> deploy/examples/policy.toml",
    ),
    "policy.policydeployment": EmptyState(
        "Each deploy or rollback of a policy is recorded here.",
        "manage.py deploy_policy <org> deploy/examples/policy.toml",
    ),
    "tenancy.apikey": EmptyState(
        "API keys let an agent's heso SDK push receipts and pull policy.",
        "manage.py issue_api_key <org>",
    ),
    "tenancy.membership": EmptyState(
        "Memberships give a console user a role in an org.",
        "manage.py add_member <org> <username> --role viewer",
    ),
    "tenancy.orgauditevent": EmptyState(
        "The org's audit trail: every key, member, policy and limit change, whoever made it."
    ),
    "tenancy.org": EmptyState(
        "An org is one tenant: its receipts, policy, keys and members.",
        "manage.py create_org <slug>",
    ),
    "events.webhookendpoint": EmptyState(
        "Webhook endpoints receive signed notifications of approvals, refusals, policy "
        "deploys and key changes."
    ),
    "events.delivery": EmptyState(
        "Each notification sent to a webhook endpoint, with its attempts. Add an endpoint "
        "first: deliveries follow the next event."
    ),
    "events.emailsubscription": EmptyState(
        "The events you are emailed about, in each of your orgs."
    ),
    "audit.evidenceexportjob": EmptyState(
        "Evidence exports are archives of an org's receipts, chain and policies for an "
        "auditor, built in the background.",
        "manage.py export_evidence <org> --output evidence.tar",
    ),
    "transparency.checkpoint": EmptyState(
        "Checkpoints are the signed heads of the public transparency log, published each epoch.",
        "manage.py publish_checkpoint",
    ),
    "transparency.witness": EmptyState(
        "Witnesses co-sign the log's checkpoints, so that nobody sees a different log.",
        "manage.py register_witness <name> <key>",
    ),
    "transparency.orglog": EmptyState(
        "Each org's own tree in the transparency log; it appears with the org's first receipt."
    ),
    "admin.logentry": EmptyState("Every change made in the console is recorded here."),
}


@register.simple_tag
def empty_state(opts: Any) -> EmptyState:
    found = EMPTY_STATES.get(opts.label_lower)
    return found or EmptyState(f"No {opts.verbose_name_plural} yet.")
