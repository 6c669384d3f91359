"""DRF's default exception handler: the deployment profile's error contract.

The profiles' base API classes name their own handler; this one covers the views that have
no profile base class (the probes, the OpenAPI document), so a refusal there (a 405, a body
that is not JSON) is in the profile's body too. Unknown exceptions stay 500, as in both.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from rest_framework.response import Response

from apps.common.api import keyscoped_exception_handler
from apps.common.teampath import teampath_exception_handler


def profile_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if settings.API_PROFILE == "teampath":
        return teampath_exception_handler(exc, context)
    return keyscoped_exception_handler(exc, context)
