"""A real OpenID Connect provider for the tests: a tiny Django project on django-oauth-toolkit's
OIDC support, run as its own process on 127.0.0.1 (``running.py`` starts it), with its own
SQLite database and an RSA signing key generated as it starts.

Two clients misbehave on purpose, by name (``validator.py``), so the relying party's checks
meet real, signed ID tokens it must refuse: these are their names. (Nothing here imports
Django: the service's tests import the names, the provider's process the rest.)"""

EXPIRED = "expired-id-tokens"  # its ID tokens expired an hour ago
WRONG_AUDIENCE = "wrong-audience"  # its ID tokens are for another audience
