"""Production: base.py tightened. No default secret, HTTPS only, explicit hosts."""

from config.env import env_bool, env_int, env_list, env_required, env_str
from config.settings.base import *

DEBUG = False
SECRET_KEY = env_required("DJANGO_SECRET_KEY")
API_KEY_DIGEST_SECRET = env_str("API_KEY_DIGEST_SECRET", SECRET_KEY)
SIMPLE_JWT = {**SIMPLE_JWT, "SIGNING_KEY": SECRET_KEY}
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", [])
# The log's origin is named explicitly (system check mirror.E201).
TRANSPARENCY_ORIGIN = env_str("TRANSPARENCY_ORIGIN", "")
TRANSPARENCY_ORIGIN_REQUIRED = True
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

# TLS terminates at the reverse proxy (deploy/nginx.conf sets X-Forwarded-Proto).
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", True)
# Probes and scrapes reach gunicorn directly over plain HTTP (compose healthcheck,
# Prometheus); the proxy never forwards /metrics (deploy/nginx.conf).
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$", r"^metrics$"]
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31_536_000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = True
SECURE_HSTS_PRELOAD = True
SESSION_COOKIE_SECURE = True
CSRF_COOKIE_SECURE = True
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"

STORAGES = {
    **STORAGES,
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}
