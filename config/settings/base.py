"""Settings shared by every environment; the other modules only tighten or speed up.

Every value that differs between deployments comes from the environment (see
``.env.example``), parsed strictly by ``config.env``.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit

import django_stubs_ext
from django.templatetags.static import static

from config.env import (
    env_bool,
    env_choice,
    env_fernet_keys,
    env_int,
    env_ip_networks,
    env_list,
    env_log_level,
    env_str,
    parse_archive_storage_url,
    parse_database_url,
    with_postgres_timeouts,
)

# Lets admin/forms classes be subscripted for type checking (ModelAdmin[Org]).
django_stubs_ext.monkeypatch()

BASE_DIR = Path(__file__).resolve().parent.parent.parent

# A development-only default; production.py refuses to start without DJANGO_SECRET_KEY.
SECRET_KEY = env_str("DJANGO_SECRET_KEY", "insecure-local-development-key-do-not-deploy")
DEBUG = env_bool("DEBUG", False)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]", "testserver"])

API_PROFILE = env_choice("API_PROFILE", "keyscoped", ("keyscoped", "teampath"))
ROOT_URLCONF = f"config.urls.{API_PROFILE}"
WSGI_APPLICATION = "config.wsgi.application"

INSTALLED_APPS = [
    # The console's theme (django-unfold), before the admin so its templates win; its basic
    # config, as the site is ours: Django's admin on a site whose sign-in is throttled
    # (apps.tenancy.admin_site).
    "unfold.apps.BasicAppConfig",
    "apps.tenancy.admin_site.ConsoleAdminConfig",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    # Spent refresh tokens (rotation with reuse detection); not org-owned, no row-level security.
    "rest_framework_simplejwt.token_blacklist",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "apps.common",
    "apps.tenancy",
    "apps.receipts",
    "apps.policy",
    "apps.approvals",
    "apps.transparency",
    "apps.audit",
    "apps.analytics",
    "apps.events",
    "apps.console",
    "apps.api",
    # The task engine (Django's tasks framework, backported) and its database queue.
    "django_tasks",
    "django_tasks_db",
]

MIDDLEWARE = [
    # Outermost: request id and the access line cover every answer, 503s included.
    "apps.common.request_log.RequestLogMiddleware",
    "apps.common.capacity.DatabaseUnavailableMiddleware",
    "apps.common.capacity.ConcurrencyLimitMiddleware",
    # NUL in a path, query or header, an oversize or empty JSON body: refused before any
    # session, credential or view reads the request (apps.common.request_guard).
    "apps.common.request_guard.RequestGuardMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    # DEBUG only (it removes itself otherwise): a 404 is the page or error body production
    # answers, not Django's technical page listing every URL pattern.
    "apps.api.handlers.DebugNotFoundMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "apps.tenancy.middleware.ConsoleOrgContextMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

_default_database_url = f"sqlite:///{'db.sqlite3'}"
DATABASE_URL = env_str("DATABASE_URL", _default_database_url) or _default_database_url
DATABASES = {"default": parse_database_url(DATABASE_URL, base_dir=BASE_DIR)}
# Persistent connections: opening a PostgreSQL connection per request would dominate the
# receipt push path. SQLite ignores it.
DATABASES["default"]["CONN_MAX_AGE"] = env_int("DATABASE_CONN_MAX_AGE", 600)
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
# A statement running longer than this is cancelled by PostgreSQL and answered 503 (0: no
# limit; run long maintenance commands such as migrate with DB_STATEMENT_TIMEOUT_MS=0).
DB_STATEMENT_TIMEOUT_MS = env_int("DB_STATEMENT_TIMEOUT_MS", 5000)
DB_CONNECT_TIMEOUT_SECONDS = env_int("DB_CONNECT_TIMEOUT_SECONDS", 5)
# How the receipt append's transaction is pipelined (apps/common/prepared.py): "libpq"
# speaks libpq's pipeline mode through psycopg's binding, the least CPU a push; "psycopg"
# uses psycopg's public pipeline and cursors only, should a psycopg release break the other.
DB_APPEND_PIPELINE = env_choice("DB_APPEND_PIPELINE", "libpq", ("libpq", "psycopg"))
# How long the libpq pipeline waits for the server at most, each wait (0: no limit): past
# it the server is taken for gone, the connection closed and the request answered 503.
# PostgreSQL answers within its statement timeout, which the default exceeds by a second.
DB_PIPELINE_WAIT_MS = env_int("DB_PIPELINE_WAIT_MS", (DB_STATEMENT_TIMEOUT_MS or 60_000) + 1_000)
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # The delivery log's index carries the org as a non-key column on PostgreSQL (an
    # index-only page read); SQLite, the local default, builds it without and says so.
    SILENCED_SYSTEM_CHECKS = ["models.W040"]
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # Django's backend, with a health check that reads the socket instead of sending
    # ``SELECT 1`` (apps/common/postgresql/base.py).
    DATABASES["default"]["ENGINE"] = "apps.common.postgresql"
    DATABASES["default"]["OPTIONS"] = with_postgres_timeouts(
        DATABASES["default"].get("OPTIONS", {}),
        statement_timeout_ms=DB_STATEMENT_TIMEOUT_MS,
        connect_timeout_seconds=DB_CONNECT_TIMEOUT_SECONDS,
    )
    # The service's prepared statements (the receipt append's, apps/receipts/append_sql.py)
    # always run on their generic plans: PostgreSQL's own choice may keep custom plans, which
    # estimate with one org's statistics (one row for an org new at the last ANALYZE, whose
    # lookups then tie with a read of the whole org). Set when the connection opens, so it
    # costs no statement; Django's own statements are bound client-side and never prepared.
    DATABASES["default"]["OPTIONS"]["options"] = (
        str(DATABASES["default"]["OPTIONS"].get("options", ""))
        + " -c plan_cache_mode=force_generic_plan"
    ).strip()
# Migrations run as the owner of the tables (``manage.py migrate`` switches to it); the
# application connects as an ordinary role that row-level security applies to.
MIGRATION_DATABASE_URL = env_str("MIGRATION_DATABASE_URL") or DATABASE_URL
MIGRATION_DATABASE = parse_database_url(MIGRATION_DATABASE_URL, base_dir=BASE_DIR)
DATABASE_APP_ROLE = str(DATABASES["default"].get("USER") or "")
DATABASE_ROUTERS = ["apps.common.db_routers.VendorRouter"]
# Row-level security default of a connection between requests: "none" (web workers: no
# org's rows) or "all" (operators: management commands). manage.py sets it per command.
ORG_CONTEXT_DEFAULT = env_choice("ORG_CONTEXT_DEFAULT", "none", ("none", "all"))

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = env_str("REDIS_URL")
# Seconds to wait for Redis (connect, and each command); 0 = no limit. A hung Redis would
# otherwise hang every request at its rate-limit check; past the timeout the limiter admits
# the request (logged) and the readiness probe reports the cache failed.
REDIS_TIMEOUT_SECONDS = env_int("REDIS_TIMEOUT_SECONDS", 1)
if REDIS_URL:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            # Apart from other deployments' keys when several share one Redis database.
            "KEY_PREFIX": env_str("CACHE_KEY_PREFIX", ""),
            "OPTIONS": {
                "socket_connect_timeout": REDIS_TIMEOUT_SECONDS or None,
                "socket_timeout": REDIS_TIMEOUT_SECONDS or None,
            },
        }
    }
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"

REST_FRAMEWORK = {
    # Deny by default: every API view names its authentication and the scope or role it
    # needs through its profile's base class.
    "DEFAULT_AUTHENTICATION_CLASSES": [],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    # The one strict JSON body parser (apps.api.parsers, the rules of apps.common.json_body):
    # size, depth, repeated names, NUL, number range; every +json media type too.
    "DEFAULT_PARSER_CLASSES": ["apps.api.parsers.StrictJsonParser"],
    "DEFAULT_CONTENT_NEGOTIATION_CLASS": "apps.api.parsers.JsonContentNegotiation",
    # Views without a profile base class (probes, the OpenAPI document) answer errors in the
    # deployment profile's body too.
    "EXCEPTION_HANDLER": "apps.api.handlers.profile_exception_handler",
    "UNAUTHENTICATED_USER": None,
    "DEFAULT_SCHEMA_CLASS": "apps.api.openapi.ProfileAutoSchema",
}

# The OpenAPI 3 document of the deployment's profile at /v1/schema, Swagger UI at /v1/docs
# with its assets from our own static files (no CDN). apps/api/openapi.py finishes the
# document per profile.
PRODUCT_NAME = "Countersign"
PRODUCT_TAGLINE = "a self-hostable control plane for AI-agent governance; works with the heso SDK"

# The console's theme (django-unfold): the product's name, and the sidebar's own navigation.
UNFOLD = {
    "SITE_TITLE": PRODUCT_NAME,
    "SITE_HEADER": PRODUCT_NAME,
    "SITE_SUBHEADER": "works with the heso SDK",
    "SITE_SYMBOL": "verified",
    "SHOW_HISTORY": True,
    "SHOW_VIEW_ON_SITE": True,
    # The navigation is grouped by job (ConsoleAdminSite.get_sidebar_list).
    "SIDEBAR": {"show_search": False, "show_all_applications": False},
    "STYLES": [lambda request: static("console/admin.css")],
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Countersign",
    "DESCRIPTION": f"{PRODUCT_TAGLINE[0].upper()}{PRODUCT_TAGLINE[1:]}.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    # No online validator badge: the page talks to this service only.
    "SWAGGER_UI_SETTINGS": {"deepLinking": True, "validatorUrl": None},
    "REDOC_DIST": "SIDECAR",
    # Enums stay inline where the serializers declare them (no generated *Enum components
    # whose names depend on which serializer was seen first).
    "ENUM_GENERATE_CHOICE_DESCRIPTION": False,
    "POSTPROCESSING_HOOKS": ["apps.api.openapi.finish_profile_document"],
}

# API keys are stored as a lookup prefix plus HMAC-SHA256(API_KEY_DIGEST_SECRET, key).
# Keeping this secret apart from SECRET_KEY lets the Django secret rotate without
# invalidating every issued key.
API_KEY_DIGEST_SECRET = env_str("API_KEY_DIGEST_SECRET", SECRET_KEY)
# Webhook signing secrets and single sign-on client secrets are stored encrypted
# (apps.common.encryption): the first key encrypts, every key decrypts (a key is rotated
# by putting a new one first, then `manage.py rotate_secrets_key`). Unset, one key is
# derived from SECRET_KEY (development, tests); production is warned (mirror.W002).
SECRETS_ENCRYPTION_KEYS = env_fernet_keys("SECRETS_ENCRYPTION_KEYS")
# Each worker remembers the keys it authenticated for this many seconds (0: never), so a
# busy agent's requests skip the key lookup: a revoked or rotated key, or a changed plan,
# takes effect on every worker within this bound (apps.tenancy.key_cache).
API_KEY_CACHE_SECONDS = env_int("API_KEY_CACHE_SECONDS", 5, minimum=0)

# Monthly mirror soft-cap per plan (appended receipts per calendar month, UTC). An org can
# override its own in the console or with `manage.py set_org_limits --monthly-cap N`.
MONTHLY_RECEIPT_CAPS = {
    "free": env_int("RECEIPT_CAP_FREE", 10_000),
    "pro": env_int("RECEIPT_CAP_PRO", 250_000),
    "team": env_int("RECEIPT_CAP_TEAM", 2_000_000),
    "custom": env_int("RECEIPT_CAP_CUSTOM", 10_000_000),
}
# Days a receipt's body stays in the mirror per plan before the closed month it was received
# in is archived (one evidence tar per org and month, to ARCHIVE_STORAGE_URL) and its bodies
# retired from the hot table; 0 keeps them for ever. An org can override its own (console,
# `manage.py set_org_limits --retention-days N`), never below RETENTION_FLOOR_DAYS but 0.
RECEIPT_RETENTION_DAYS = {
    "free": env_int("RETENTION_DAYS_FREE", 90),
    "pro": env_int("RETENTION_DAYS_PRO", 365),
    "team": env_int("RETENTION_DAYS_TEAM", 730),
    "custom": env_int("RETENTION_DAYS_CUSTOM", 0),
}
RETENTION_FLOOR_DAYS = env_int("RETENTION_FLOOR_DAYS", 30, minimum=1)
# SDK-plane rate limits per plan: a sustained rate (requests per minute) and a burst (the
# bucket's capacity: that many may arrive at once). Counted per org across its keys, in
# the shared cache (Redis when REDIS_URL is set). Overridable per org (admin,
# `manage.py set_org_limits --rate-per-minute R --burst B`).
RATE_LIMITS = {
    "free": {
        "per_minute": env_int("RATE_FREE_PER_MINUTE", 120, minimum=1),
        "burst": env_int("RATE_FREE_BURST", 30, minimum=1),
    },
    "pro": {
        "per_minute": env_int("RATE_PRO_PER_MINUTE", 1_200, minimum=1),
        "burst": env_int("RATE_PRO_BURST", 200, minimum=1),
    },
    "team": {
        "per_minute": env_int("RATE_TEAM_PER_MINUTE", 6_000, minimum=1),
        "burst": env_int("RATE_TEAM_BURST", 600, minimum=1),
    },
    "custom": {
        "per_minute": env_int("RATE_CUSTOM_PER_MINUTE", 30_000, minimum=1),
        "burst": env_int("RATE_CUSTOM_BURST", 2_000, minimum=1),
    },
}
# Dashboard plane: its own limit, per console user.
DASHBOARD_RATE_PER_MINUTE = env_int("DASHBOARD_RATE_PER_MINUTE", 300, minimum=1)
DASHBOARD_RATE_BURST = env_int("DASHBOARD_RATE_BURST", 60, minimum=1)

# The transparency log (transparency.md §1). The origin of epoch 1 is the log's for ever
# (a system check and publication itself refuse another); production must set it.
TRANSPARENCY_ORIGIN = env_str("TRANSPARENCY_ORIGIN", "localhost/v1/log")
TRANSPARENCY_ORIGIN_REQUIRED = False
# 0: no periodic publication (epochs only from manage.py publish_checkpoint).
TRANSPARENCY_EPOCH_SECONDS = env_int("TRANSPARENCY_EPOCH_SECONDS", 10)
TRANSPARENCY_PUBLIC_RATE_PER_MINUTE = env_int("TRANSPARENCY_PUBLIC_RATE_PER_MINUTE", 600, minimum=1)
TRANSPARENCY_COSIGN_RATE_PER_MINUTE = env_int("TRANSPARENCY_COSIGN_RATE_PER_MINUTE", 60, minimum=1)
# Off switch (load tests of the bare push path): "false" disables every rate limit.
RATE_LIMITS_ENABLED = env_bool("RATE_LIMITS_ENABLED", True)

# Largest request body on any route (receipts and batches, policy, approvals, tokens, the
# console's vote, admin forms): Content-Length is checked before reading, the bytes read
# after; larger answers 413 in the profile's error body (apps.common.json_body). Its former
# name RECEIPT_MAX_BODY_BYTES is still read when JSON_BODY_MAX_BYTES is not set.
JSON_BODY_MAX_BYTES = env_int(
    "JSON_BODY_MAX_BYTES",
    env_int("RECEIPT_MAX_BODY_BYTES", 1_048_576, minimum=1024),
    minimum=1024,
)
DATA_UPLOAD_MAX_MEMORY_SIZE = JSON_BODY_MAX_BYTES
# Deepest nesting of arrays/objects in a JSON body, the body's own counting as one: deeper
# is refused as not JSON (a receipt: Malformed). 128 is the recursion limit of serde_json,
# the reference SDK's decoder; at most 250, below the canonical serializer's own limit.
JSON_BODY_MAX_DEPTH = env_int("JSON_BODY_MAX_DEPTH", 128, minimum=16, maximum=250)
# Team-path profile: most receipts in one POST /v1/receipts/batch (more: 400). The whole
# batch body is also held to JSON_BODY_MAX_BYTES.
TEAMPATH_BATCH_MAX = env_int("TEAMPATH_BATCH_MAX", 100, minimum=1)
# Team-path profile: seconds an opened approval can be answered when the suspended receipt
# signed no expiry of its own (suspension.approval.expires_at).
APPROVAL_DEFAULT_TTL_SECONDS = env_int("APPROVAL_DEFAULT_TTL_SECONDS", 3600, minimum=60)

# Policy deploys: the largest TOML accepted (characters). The replay of a proposed policy
# (the preview, a proposal): its longest window (days); the most receipts one replay reads
# (newest first; the report says when the window held more); and the most receipts, by the
# analytics rollups, a window may hold to be replayed in the request: a larger one runs in
# the worker and the page polls for its report.
POLICY_MAX_TOML_CHARS = env_int("POLICY_MAX_TOML_CHARS", 262_144, minimum=1024)
POLICY_PREVIEW_MAX_DAYS = env_int("POLICY_PREVIEW_MAX_DAYS", 90, minimum=1)
POLICY_PREVIEW_MAX_RECEIPTS = env_int("POLICY_PREVIEW_MAX_RECEIPTS", 200_000, minimum=1)
POLICY_REPLAY_INLINE_RECEIPTS = env_int("POLICY_REPLAY_INLINE_RECEIPTS", 1_000, minimum=0)
# The window a co-signed policy change is replayed over when it is proposed (days).
POLICY_PROPOSAL_REPLAY_DAYS = env_int("POLICY_PROPOSAL_REPLAY_DAYS", 7, minimum=1)
# The fleet view (apps.policy.fleet): seconds after a deploy at which keys still enforcing a
# replaced version are reported (the policy.stale_agents event, once per deploy), and
# seconds between the worker's checks for deploys that old (0 turns the checks off).
POLICY_STALE_AGENT_SECONDS = env_int("POLICY_STALE_AGENT_SECONDS", 3600, minimum=1)
POLICY_STALE_AGENT_CHECK_SECONDS = env_int("POLICY_STALE_AGENT_CHECK_SECONDS", 60)

# Dashboard-plane session JWTs (console members). Short access lifetime: a downgraded
# member's refresh re-reads the membership. A refresh token is spent by its one use
# (rotation; a second use is refused and ends the user's session tokens), and a password
# change, a deactivation or a membership removal ends them all (apps.tenancy.console_tokens).
SIMPLE_JWT = {
    "ACCESS_TOKEN_LIFETIME": timedelta(seconds=env_int("CONSOLE_JWT_ACCESS_SECONDS", 300)),
    "REFRESH_TOKEN_LIFETIME": timedelta(seconds=env_int("CONSOLE_JWT_REFRESH_SECONDS", 28_800)),
    "SIGNING_KEY": SECRET_KEY,
    "AUTH_HEADER_TYPES": ("Bearer",),
    "UPDATE_LAST_LOGIN": False,
    "ROTATE_REFRESH_TOKENS": True,
    "BLACKLIST_AFTER_ROTATION": True,
}

# Credential guessing (apps.tenancy.credential_limits, with django-ratelimit on the shared
# cache): failed authentications per client address (console sign-ins, API keys, session
# and refresh tokens, counted together) and failed console sign-ins per username, in a
# fixed window. Past a limit the answer is 429 with Retry-After, before any password
# hashing or database work, until the window ends.
AUTH_FAILURE_LIMITS_ENABLED = env_bool("AUTH_FAILURE_LIMITS_ENABLED", True)
AUTH_FAILURES_PER_ADDRESS = env_int("AUTH_FAILURES_PER_ADDRESS", 30, minimum=1)
LOGIN_FAILURES_PER_USERNAME = env_int("LOGIN_FAILURES_PER_USERNAME", 10, minimum=1)
AUTH_FAILURE_WINDOW_SECONDS = env_int("AUTH_FAILURE_WINDOW_SECONDS", 900, minimum=1)
# Peers whose X-Forwarded-For is believed (the reverse proxy): behind them the client
# address is the right-most forwarded address that is not itself one of them. A Unix
# socket peer (no address) is a local proxy too.
TRUSTED_PROXY_IPS = env_ip_networks("TRUSTED_PROXY_IPS", ["127.0.0.1", "::1"])
# An unreadable counter (cache outage) admits the attempt (logged), as the rate limiter does.
RATELIMIT_FAIL_OPEN = True

# Operations: capacity, probes, metrics, logs.
# Requests in flight per process before answering 503 at once (0: no ceiling).
MAX_CONCURRENT_REQUESTS = env_int("MAX_CONCURRENT_REQUESTS", 0)
# Retry-After on 503 (database briefly unavailable, at capacity, not ready).
RETRY_AFTER_SECONDS = env_int("RETRY_AFTER_SECONDS", 2, minimum=1)
# gunicorn workers as deploy/gunicorn.conf.py reads them; 0: unset (one per core).
WEB_WORKERS = env_int("GUNICORN_WORKERS", env_int("WEB_CONCURRENCY", 0))
METRICS_ENABLED = env_bool("METRICS_ENABLED", False)
METRICS_ALLOWED_IPS = env_ip_networks("METRICS_ALLOWED_IPS", ["127.0.0.1", "::1"])

LOG_LEVEL = env_log_level("LOG_LEVEL", "INFO")
# One JSON object per line on stdout; lines written while serving carry the request id.
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"json": {"()": "apps.common.json_logging.JsonFormatter"}},
    "filters": {"outage": {"()": "apps.common.json_logging.OutageWithoutTraceback"}},
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "stream": "ext://sys.stdout",
            "formatter": "json",
            "filters": ["outage"],
        }
    },
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
}

# Background work: Django's tasks framework (django-tasks) on its database backend. The
# queue is a table of the same database, so work a change enqueues commits or rolls back
# with the change; workers (`manage.py run_worker`) on any number of machines share it
# (SELECT ... FOR UPDATE SKIP LOCKED on PostgreSQL).
# Three queues, each run by its own threads in every worker (apps.common.tasks): webhook
# attempts wait on other parties' servers and must not hold up the periodic work (approval
# expiry, transparency epochs) or the rest (fan-out, emails, exports).
TASKS = {
    "default": {
        "BACKEND": "django_tasks_db.DatabaseBackend",
        "QUEUES": ["default", "periodic", "deliveries"],
    }
}
# A worker renews its lease every third of this; a task still running under a worker
# not seen for a whole lease is handed to another worker (at least once), at most
# TASK_MAX_ATTEMPTS times in all, then failed.
TASK_WORKER_LEASE_SECONDS = env_int("TASK_WORKER_LEASE_SECONDS", 30, minimum=1)
TASK_MAX_ATTEMPTS = env_int("TASK_MAX_ATTEMPTS", 3, minimum=1)
# /metrics counts the tasks running for longer than this (mirror_task_running_over_bound).
TASK_RUNNING_BOUND_SECONDS = env_int("TASK_RUNNING_BOUND_SECONDS", 900, minimum=1)
# Seconds between the periodic runs the worker's scheduler enqueues (apps.common.scheduling).
APPROVAL_SWEEP_SECONDS = env_int("APPROVAL_SWEEP_SECONDS", 60, minimum=1)
DELIVERY_SWEEP_SECONDS = env_int("DELIVERY_SWEEP_SECONDS", 60, minimum=1)
# Seconds between folds of newly mirrored receipts into the dashboard's daily rollups
# (apps/analytics/models.py); 0 turns the fold off (the counters stay exact, reading more).
ROLLUP_FOLD_SECONDS = env_int("ROLLUP_FOLD_SECONDS", 10)
# Finished task rows older than this are deleted by the daily prune (0: kept).
TASK_RESULT_RETENTION_DAYS = env_int("TASK_RESULT_RETENTION_DAYS", 7)

# Outbound events (apps.events). Off: no event is recorded (load tests of the bare path).
EVENTS_ENABLED = env_bool("EVENTS_ENABLED", True)
# How long a process trusts its view of which event types an org subscribes to (an org
# with no endpoint and no email subscriber then costs nothing per change).
EVENTS_SUBSCRIBER_CACHE_SECONDS = env_int("EVENTS_SUBSCRIBER_CACHE_SECONDS", 5)
# The console's public address, for links in events and emails (the approval's signing page).
PUBLIC_BASE_URL = (env_str("PUBLIC_BASE_URL", "http://127.0.0.1:8000") or "").rstrip("/")
# Single sign-on to the console (OpenID Connect, each org its own provider: the console's
# Single sign-on page). Plain-http issuers are refused unless allowed (development only);
# a provider's answers are awaited at most SSO_TIMEOUT_SECONDS; ID token times are read
# with SSO_CLOCK_SKEW_SECONDS of leeway.
SSO_ALLOW_HTTP_ISSUERS = env_bool("SSO_ALLOW_HTTP_ISSUERS", False)
SSO_TIMEOUT_SECONDS = env_int("SSO_TIMEOUT_SECONDS", 10, minimum=1, maximum=60)
SSO_CLOCK_SKEW_SECONDS = env_int("SSO_CLOCK_SKEW_SECONDS", 30, minimum=0, maximum=300)
# mozilla-django-oidc's settings (the provider itself is the org's, not set here): the
# authorization code flow with PKCE and a nonce, RS256 ID tokens, the callback route.
AUTHENTICATION_BACKENDS = [
    "django.contrib.auth.backends.ModelBackend",
    "apps.tenancy.sso.OrgOidcBackend",
]
OIDC_RP_SIGN_ALGO = "RS256"
OIDC_USE_PKCE = True
OIDC_USE_NONCE = True
OIDC_AUTHENTICATION_CALLBACK_URL = "console-sso-callback"
OIDC_RP_SCOPES = "openid email profile"
OIDC_TIMEOUT = SSO_TIMEOUT_SECONDS
OIDC_STORE_ACCESS_TOKEN = False
OIDC_STORE_ID_TOKEN = False
# SCIM 2.0 provisioning (django-scim2) at /scim/v2/, each org with its own bearer token:
# resources are located under PUBLIC_BASE_URL.
_PUBLIC = urlsplit(PUBLIC_BASE_URL)
SCIM_SERVICE_PROVIDER = {
    "SCHEME": _PUBLIC.scheme or "https",
    "NETLOC": _PUBLIC.netloc or "localhost",
    "AUTHENTICATION_SCHEMES": [
        {
            "type": "oauthbearertoken",
            "name": "Bearer token",
            "description": "The org's SCIM token (console: Keys and members → SCIM tokens)",
            "primary": True,
        }
    ],
    "USER_MODEL_GETTER": "apps.api.scim.adapters.scim_user_model",
    "USER_ADAPTER": "apps.api.scim.adapters.ScimUserAdapter",
    "GROUP_MODEL": "apps.tenancy.models.ScimGroup",
    "GROUP_ADAPTER": "apps.api.scim.adapters.ScimGroupAdapter",
    "USER_FILTER_PARSER": "apps.api.scim.filters.ScimUserFilterQuery",
    "GROUP_FILTER_PARSER": "apps.api.scim.filters.ScimGroupFilterQuery",
    "GET_EXTRA_MODEL_FILTER_KWARGS_GETTER": "apps.api.scim.adapters.org_filter_kwargs_getter",
    "GET_IS_AUTHENTICATED_PREDICATE": "apps.api.scim.auth.is_scim_client",
    "AUTH_CHECK_MIDDLEWARE": "apps.api.scim.auth.ScimTokenCheck",
    "WWW_AUTHENTICATE_HEADER": 'Bearer realm="scim"',
}
# Invitations to join an org: hours an invitation link works (sending it again starts anew).
INVITATION_TTL_HOURS = env_int("INVITATION_TTL_HOURS", 72, minimum=1, maximum=720)
# Webhook delivery: the deadline of a whole attempt, the most response bytes read, retries with
# exponential backoff (base * 4^(n-1), capped, with jitter) until the retry window is over,
# and the run of failed attempts after which an endpoint is disabled.
WEBHOOK_TIMEOUT_SECONDS = env_int("WEBHOOK_TIMEOUT_SECONDS", 10, minimum=1)
WEBHOOK_MAX_RESPONSE_BYTES = env_int("WEBHOOK_MAX_RESPONSE_BYTES", 65_536, minimum=0)
WEBHOOK_RETRY_BASE_SECONDS = env_int("WEBHOOK_RETRY_BASE_SECONDS", 5, minimum=1)
WEBHOOK_RETRY_MAX_DELAY_SECONDS = env_int("WEBHOOK_RETRY_MAX_DELAY_SECONDS", 21_600, minimum=1)
WEBHOOK_RETRY_WINDOW_SECONDS = env_int("WEBHOOK_RETRY_WINDOW_SECONDS", 93_600, minimum=1)
WEBHOOK_DISABLE_AFTER_FAILURES = env_int("WEBHOOK_DISABLE_AFTER_FAILURES", 15, minimum=1)
# After a secret rotation the previous secret signs too for this long.
WEBHOOK_SECRET_OVERLAP_SECONDS = env_int("WEBHOOK_SECRET_OVERLAP_SECONDS", 86_400)
# Private, loopback, link-local and other non-public destinations are refused unless this
# is on (development and tests only; production keeps it off).
WEBHOOK_ALLOW_PRIVATE_DESTINATIONS = env_bool("WEBHOOK_ALLOW_PRIVATE_DESTINATIONS", False)

# Email (members' opt-in notifications, endpoint.disabled): the console backend prints
# them; EMAIL_BACKEND=django.core.mail.backends.smtp.EmailBackend with EMAIL_HOST etc. sends.
EMAIL_BACKEND = env_str("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
EMAIL_HOST = env_str("EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("EMAIL_PORT", 25)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = env_str("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
EMAIL_TIMEOUT = env_int("EMAIL_TIMEOUT", 10, minimum=1)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "countersign@localhost")

# Local files of this checkout that are not configuration: the demo's secrets (`make run`,
# manage.py bootstrap_demo) and the receipt its printed curl pushes. Ignored by git.
LOCAL_DATA_DIR = Path(env_str("LOCAL_DATA_DIR", str(BASE_DIR / "local-data")))

# Files the service writes (background evidence exports): Django's default storage, a
# directory on local disk unless STORAGES says otherwise.
MEDIA_ROOT = Path(env_str("MEDIA_ROOT", str(LOCAL_DATA_DIR / "media")))
# Background evidence exports an org may have queued or running at once; one more is
# refused (409) until one is ready or has failed. Each reads the org's whole window.
EVIDENCE_EXPORTS_PER_ORG = env_int("EVIDENCE_EXPORTS_PER_ORG", 2, minimum=1)

# The archive of retired receipts (docs/retention.md): one evidence tar per org and closed
# month past its retention, written once through Django's storage API, read back and
# verified before the month's bodies leave the mirror. Empty: a directory (ARCHIVE_ROOT);
# file:///absolute/path; or s3://bucket/prefix?endpoint_url=...&region_name=... through
# django-storages (boto3's credentials; a bucket with object lock keeps each tar for its
# default retention, write-once; add object_lock=required to retire nothing it does not
# hold).
ARCHIVE_ROOT = Path(env_str("ARCHIVE_ROOT", str(LOCAL_DATA_DIR / "archive")))
ARCHIVE_STORAGE_URL = env_str("ARCHIVE_STORAGE_URL", "")
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    "archive": parse_archive_storage_url(ARCHIVE_STORAGE_URL, default_root=ARCHIVE_ROOT),
}
# Seconds between the retention sweeps the worker's scheduler enqueues (archive, verify,
# retire each due org-month; idempotent); 0 turns retention off.
RETENTION_SWEEP_SECONDS = env_int("RETENTION_SWEEP_SECONDS", 3600)
# Entries whose bodies one statement retires (one short transaction each: the append
# never waits long behind it, and VACUUM can reclaim as it goes).
RETENTION_RETIRE_BATCH = env_int("RETENTION_RETIRE_BATCH", 5000, minimum=1)
# Retention of what the service writes beside the mirror, in days (0: kept forever). A
# finished evidence export (its file, then its row) goes this long after it finished,
# unless an active legal hold covers its window (apps.audit.selectors.legal_holds_blocking);
# the webhook delivery log (each event and its deliveries, once all are finished) this long
# after the event: it is operational, not evidence, and no hold keeps it; a finished policy
# replay (ready or failed) this long after it finished, unless a policy proposal names it
# (kept with the proposal); one pending or running is never deleted.
EVIDENCE_EXPORT_RETENTION_DAYS = env_int("EVIDENCE_EXPORT_RETENTION_DAYS", 30)
WEBHOOK_DELIVERY_RETENTION_DAYS = env_int("WEBHOOK_DELIVERY_RETENTION_DAYS", 30)
POLICY_REPLAY_RETENTION_DAYS = env_int("POLICY_REPLAY_RETENTION_DAYS", 30)
# Seconds between the periodic runs that delete them (0: off); each run deletes in
# batches of RETENTION_PRUNE_BATCH rows found through an index, at most
# RETENTION_PRUNE_BATCHES_PER_RUN batches, so a backlog never holds the periodic queue.
RETENTION_PRUNE_SECONDS = env_int("RETENTION_PRUNE_SECONDS", 3600)
RETENTION_PRUNE_BATCH = env_int("RETENTION_PRUNE_BATCH", 500, minimum=1)
RETENTION_PRUNE_BATCHES_PER_RUN = env_int("RETENTION_PRUNE_BATCHES_PER_RUN", 20, minimum=1)
