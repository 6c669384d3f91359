"""The ``route`` fixture: acme's agent key pushing through each of the three routes."""

from __future__ import annotations

from typing import Any

import pytest

from tests.interop.corpus import KeyScopedRoute, Route, TeamPathBatchRoute, TeamPathRoute

TEAMPATH_URLS = pytest.mark.urls("config.urls.teampath")


@pytest.fixture(
    params=[
        pytest.param("key-scoped", id="key-scoped"),
        pytest.param("team-path", id="team-path", marks=TEAMPATH_URLS),
        pytest.param("team-path-batch", id="team-path-batch", marks=TEAMPATH_URLS),
    ]
)
def route(request: pytest.FixtureRequest, cast: Any, settings: Any) -> Route:
    """acme's agent key, pushing through one of the three routes."""
    if request.param == "key-scoped":
        return KeyScopedRoute(cast.acme_key.secret)
    settings.API_PROFILE = "teampath"  # answers built outside DRF follow the profile
    if request.param == "team-path":
        return TeamPathRoute(cast.acme_key.secret)
    return TeamPathBatchRoute(cast.acme_key.secret)
