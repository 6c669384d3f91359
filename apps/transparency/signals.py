"""Every org gets its log identifier when it is created (transparency.md §1)."""

from __future__ import annotations

from typing import Any

from django.db.models.signals import post_save
from django.dispatch import receiver

from apps.tenancy.models import Org
from apps.transparency.models import OrgLog


@receiver(post_save, sender=Org, dispatch_uid="transparency_org_log")
def _org_log_on_create(sender: Any, instance: Org, created: bool, raw: bool, **kwargs: Any) -> None:
    if created and not raw:
        OrgLog.objects.get_or_create(org=instance)
