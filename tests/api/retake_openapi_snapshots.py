"""Retake both OpenAPI snapshots of ``tests/data/openapi`` from the documents as they are
now (see ``test_openapi_snapshot``): a change that adds routes, statuses or fields runs

    DJANGO_SETTINGS_MODULE=config.settings.test python -m tests.api.retake_openapi_snapshots

and commits the result with it.
"""

from __future__ import annotations

import json

import django

django.setup()

from apps.api.openapi import PROFILES, profile_document  # noqa: E402
from tests.api.test_openapi_snapshot import SNAPSHOTS  # noqa: E402

for profile in PROFILES:
    text = json.dumps(profile_document(profile), indent=1, sort_keys=True) + "\n"
    (SNAPSHOTS / f"{profile}.json").write_text(text)
