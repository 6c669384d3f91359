"""Tests: only speed-ups over base.py."""

from config.settings.base import *

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
DEBUG = False

# Test code reads and writes every org's rows directly; requests still run in their org.
ORG_CONTEXT_DEFAULT = "all"

# Rate limits are exercised by their own tests (which switch them on); elsewhere a test
# pushing hundreds of receipts must not be refused for speed.
RATE_LIMITS_ENABLED = False

# Likewise the failed-authentication limits (tests/tenancy/test_credential_limits.py switches
# them on): the suite's own wrong keys and tokens, all from 127.0.0.1, must not add up.
AUTH_FAILURE_LIMITS_ENABLED = False

# The suite's webhook receivers listen on 127.0.0.1 (the SSRF tests switch this off), and
# retry quickly.
WEBHOOK_ALLOW_PRIVATE_DESTINATIONS = True
WEBHOOK_TIMEOUT_SECONDS = 2
EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"

# The suite's OpenID Connect provider (tests/oidc_provider) listens on 127.0.0.1 over http.
SSO_ALLOW_HTTP_ISSUERS = True
