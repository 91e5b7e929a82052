"""Settings for latencyboard, all read from the environment.

Local defaults are safe and need nothing set: ``make run`` starts an embedded PostgreSQL and
Redis on the ports below. With ``DEBUG=false`` the secrets and hosts have no defaults and a
missing one stops start-up with ``ImproperlyConfigured``. ``docker/.env.example`` lists every
variable.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import dj_database_url
from celery.schedules import crontab
from django.core.exceptions import ImproperlyConfigured

from latencyboard.dashboards.bottleneck import parse_stage_kinds
from latencyboard.env import env_bool, env_int, env_list, env_str
from latencyboard.live.layers import redis_channel_layers
from latencyboard.local.embedded import REDIS_CREDENTIAL, SUPERUSER_CREDENTIAL, kept_password
from latencyboard.notifications.transport import BadNetworkError, parse_networks
from latencyboard.task_limits import (
    DEFAULT_LIMIT,
    TIME_LIMITS,
    parse_time_limits,
    task_annotations,
)

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("LATENCYBOARD_VAR_DIR", str(BASE_DIR / "var")))

DEBUG = env_bool("DEBUG", True)

EMBEDDED_PG_PORT = env_int("EMBEDDED_PG_PORT", 54329, minimum=1, maximum=65535)
EMBEDDED_REDIS_PORT = env_int("EMBEDDED_REDIS_PORT", 56379, minimum=1, maximum=65535)


def _required_in_production(name: str, local_default: str) -> str:
    value = env_str(name)
    if value:
        return value
    if DEBUG:
        return local_default
    raise ImproperlyConfigured(f"{name} must be set when DEBUG is off")


SECRET_KEY = _required_in_production(
    "SECRET_KEY", "local-development-only-key-never-used-with-debug-off-3f9a1c7e5b2d8046"
)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS") or (["localhost", "127.0.0.1", "[::1]"] if DEBUG else [])
if not ALLOWED_HOSTS:
    raise ImproperlyConfigured("ALLOWED_HOSTS must be set when DEBUG is off")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS")
# Where people open this site: links in notifications start with it.
PUBLIC_URL = env_str("PUBLIC_URL", "http://localhost:8000")

# By default, the embedded servers of `make run`, with the passwords it keeps in VAR_DIR: so a
# command run by hand beside it reaches them (the runner gives its own children their URLs).
DATABASE_URL = _required_in_production(
    "DATABASE_URL",
    f"postgresql://postgres:{kept_password(VAR_DIR, SUPERUSER_CREDENTIAL)}"
    f"@127.0.0.1:{EMBEDDED_PG_PORT}/latencyboard",
)
# The owner role `manage.py migrate` connects as, which then hands the application role
# (DATABASE_URL's user) every table but the audit log's (latencyboard/storage/roles.py).
# Empty: DATABASE_URL's role migrates and owns everything, the audit log included.
DATABASE_MIGRATION_URL = env_str("DATABASE_MIGRATION_URL")
REDIS_URL = _required_in_production(
    "REDIS_URL",
    f"redis://:{kept_password(VAR_DIR, REDIS_CREDENTIAL)}@127.0.0.1:{EMBEDDED_REDIS_PORT}/0",
)

try:
    _database = dj_database_url.parse(DATABASE_URL, conn_max_age=60, conn_health_checks=True)
except ValueError as exc:
    raise ImproperlyConfigured(f"DATABASE_URL is malformed: {exc}") from exc
if _database["ENGINE"] != "django.db.backends.postgresql":
    raise ImproperlyConfigured("DATABASE_URL must point at PostgreSQL (postgresql://…)")
DATABASES = {"default": _database}

# Optional streaming read replica for dashboard reads (see latencyboard/db_router.py).
DATABASE_REPLICA_URL = env_str("DATABASE_REPLICA_URL")
# Past this replay lag a dashboard reads the primary instead (0: only a caught-up replica).
DATABASE_REPLICA_MAX_LAG_SECONDS = env_int("DATABASE_REPLICA_MAX_LAG_SECONDS", 30, minimum=0)
# An unreachable replica is tried again after this long; until then the primary serves reads.
DATABASE_REPLICA_RETRY_SECONDS = env_int("DATABASE_REPLICA_RETRY_SECONDS", 10, minimum=0)
if DATABASE_REPLICA_URL:
    try:
        _replica = dj_database_url.parse(
            DATABASE_REPLICA_URL, conn_max_age=60, conn_health_checks=True
        )
    except ValueError as exc:
        raise ImproperlyConfigured(f"DATABASE_REPLICA_URL is malformed: {exc}") from exc
    if _replica["ENGINE"] != "django.db.backends.postgresql":
        raise ImproperlyConfigured("DATABASE_REPLICA_URL must point at PostgreSQL (postgresql://…)")
    # A replica that does not answer must not hold a dashboard for libpq's default of forever.
    _replica.setdefault("OPTIONS", {}).setdefault("connect_timeout", 2)
    # Tests read the primary's test database through it, as the replica copies the primary.
    _replica["TEST"] = {"MIRROR": "default"}
    DATABASES["replica"] = _replica
DATABASE_ROUTERS = ["latencyboard.db_router.ReplicaRouter"]
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

INSTALLED_APPS = [
    "latencyboard.web.apps.AuditedAdminConfig",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    # Before staticfiles: `manage.py runserver` leaves static files to WhiteNoise too.
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "channels",
    "axes",
    "csp",
    "latencyboard.teams",
    "latencyboard.pipelines",
    "latencyboard.spans",
    "latencyboard.rollups",
    "latencyboard.sla",
    "latencyboard.dashboards",
    "latencyboard.local",
    "latencyboard.apitokens",
    "latencyboard.alerts",
    "latencyboard.retention",
    "latencyboard.demo",
    "ingest",
    "audits",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Outside everything that may answer an error: any error under /api/ leaves as JSON.
    "latencyboard.web.api_errors.JsonApiErrors",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "latencyboard.fairness.requests_in_flight.TeamRequestsInFlight",
    "latencyboard.db_router.ReplicaReads",
    "audits.middleware.RecordRefusals",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    # Last, as django-axes requires: it turns a locked-out login into the lockout page.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "latencyboard.urls"
ASGI_APPLICATION = "latencyboard.asgi.application"
WSGI_APPLICATION = None

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
            ]
        },
    }
]

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
AUTHENTICATION_BACKENDS = [
    # First: refuses (and counts) logins of a locked-out username from the same address.
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATICFILES_FINDERS = [
    "django.contrib.staticfiles.finders.FileSystemFinder",
    "django.contrib.staticfiles.finders.AppDirectoriesFinder",
    "latencyboard.web.finders.PlotlyFinder",
]
STATIC_ROOT = Path(env_str("STATIC_ROOT", str(BASE_DIR / "staticfiles")))
# WhiteNoise serves the static files in every mode. Collected (production, and `make run`,
# which collects into var/ first): hashed names cached for a year, precompressed gzip and
# brotli. Not collected (tests, a bare runserver): the sources as they are, edits seen at once.
STATIC_COLLECTED = env_bool("STATIC_COLLECTED", not DEBUG)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "latencyboard.web.storage.CollectedStaticStorage"
        if STATIC_COLLECTED
        else "django.contrib.staticfiles.storage.StaticFilesStorage"
    },
}
# Dynamic responses (the charts' JSON is most of a repeat visit) are gzipped too; Django pads
# each one with random bytes against BREACH and masks CSRF tokens.
MIDDLEWARE[1:1] = [
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.middleware.gzip.GZipMiddleware",
]
WHITENOISE_AUTOREFRESH = not STATIC_COLLECTED
WHITENOISE_USE_FINDERS = not STATIC_COLLECTED
WHITENOISE_KEEP_ONLY_HASHED_FILES = True
# /favicon.ico and other files browsers ask for at the root.
WHITENOISE_ROOT = BASE_DIR / "latencyboard" / "web" / "root"

# Production hardening: on by default whenever DEBUG is off; a TLS-terminating proxy in front
# sets X-Forwarded-Proto, which SECURE_PROXY_SSL_HEADER trusts only when asked to.
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", not DEBUG)
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", not DEBUG)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", not DEBUG)
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0 if DEBUG else 31_536_000, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", not DEBUG)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", not DEBUG)
if env_bool("SECURE_PROXY_SSL_HEADER", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
# Probes speak plain HTTP to the container; everything else is redirected to HTTPS.
SECURE_REDIRECT_EXEMPT = [r"^healthz$"]
X_FRAME_OPTIONS = "DENY"
SESSION_COOKIE_HTTPONLY = True

# ----- Login throttling and Content-Security-Policy ----------------------------------------------
# After LOGIN_FAILURE_LIMIT wrong passwords for one username from one address, /login/ and
# /admin/login/ answer 429 with the lockout page until LOGIN_COOLOFF_MINUTES have passed since
# the last failure (failures while locked out restart the wait). Attempts are rows in the
# database, so every web process sees them.
AXES_FAILURE_LIMIT = env_int("LOGIN_FAILURE_LIMIT", 5, minimum=1)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("LOGIN_COOLOFF_MINUTES", 15, minimum=1))
# After this many wrong passwords from one address, whatever the user names, that address is
# locked out the same way: trying a few passwords on every name stops there. Higher than the
# per-name limit, so colleagues behind one NAT are not locked out by each other's typos.
LOGIN_ADDRESS_FAILURE_LIMIT = env_int("LOGIN_ADDRESS_FAILURE_LIMIT", 20, minimum=1)
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_HTTP_RESPONSE_CODE = 429
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
AXES_HANDLER = "latencyboard.web.login_lockout.AddressLockoutHandler"
AXES_LOCKOUT_CALLABLE = "latencyboard.web.login_lockout.lockout_response"
AXES_VERBOSE = False
# The client address is the socket's peer unless proxies are declared: X-Forwarded-For is
# trusted only then, or anyone could pick a fresh address per guess. Each proxy appends the
# address it saw, so the header holds the client and then every proxy but the last (whose
# address is the peer); a header of any other length falls back to the peer.
TRUSTED_PROXY_COUNT = env_int("TRUSTED_PROXY_COUNT", 0, minimum=0, maximum=10)
if TRUSTED_PROXY_COUNT:
    AXES_IPWARE_PROXY_ORDER = "left-most"
    AXES_IPWARE_PROXY_COUNT = TRUSTED_PROXY_COUNT - 1
    AXES_IPWARE_META_PRECEDENCE_ORDER = ("HTTP_X_FORWARDED_FOR", "REMOTE_ADDR")

# No inline script anywhere: pages pass data to their static scripts in json_script blocks
# and data- attributes. Styles need 'unsafe-inline': plotly.js inserts <style> elements (its
# global rules, per-chart modebar rules under generated ids, MapLibre's CSS) and sets style
# attributes through d3; its "no-inline-styles" opt-out needs its compiled CSS, which the
# plotly package does not ship. 'self' also matches ws:/wss: to this host (CSP Level 3).
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'", "'unsafe-inline'"],
        "img-src": ["'self'", "data:", "blob:"],
        "connect-src": ["'self'"],
        "font-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    }
}

REST_FRAMEWORK = {
    # Bearer first: a refused token (or no credentials at all) answers 401 with its challenge.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "latencyboard.apitokens.authentication.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": [
        "rest_framework.permissions.IsAuthenticated",
        "latencyboard.apitokens.authentication.TokenScopeAllows",
    ],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "latencyboard API",
    "DESCRIPTION": "Per-stage latency percentiles, SLAs and traces of ML inference pipelines. "
    "Every timestamp answered is ISO 8601 in UTC with a Z, like 2026-11-24T10:41:00Z, with a "
    "six-digit fraction of a second only when there is one (2026-11-24T10:41:00.250000Z); "
    "timestamps sent may carry any offset.",
    "VERSION": "0.1.0",
    # The pipeline charts share one route: one operation per chart in the schema.
    "PREPROCESSING_HOOKS": ["latencyboard.dashboards.api.chart_endpoints"],
    # Redoc from the installed sidecar package: the docs work offline and load nothing external.
    "REDOC_DIST": "SIDECAR",
    # Alerts and their deliveries both have a "status": name the two choice sets apart.
    "ENUM_NAME_OVERRIDES": {
        "AlertStatusEnum": "latencyboard.alerts.models.AlertStatus",
        "DeliveryStatusEnum": "latencyboard.alerts.models.DeliveryStatus",
    },
}

CHANNEL_LAYERS = redis_channel_layers(REDIS_URL)
# Off: folds publish nothing to the live pages (they still load, and show what they fetch).
LIVE_UPDATES = env_bool("LIVE_UPDATES", True)

CELERY_BROKER_URL = REDIS_URL
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Notifications go to a queue of their own, served by its own worker: a receiver that answers
# slowly then delays other notifications, never the fold, alerts or reports.
NOTIFICATIONS_QUEUE = "notifications"
CELERY_TASK_ROUTES = {"alerts.send_deliveries": {"queue": NOTIFICATIONS_QUEUE}}
# Soft and hard time limits of every task (latencyboard/task_limits.py has them per family);
# TASK_TIME_LIMITS="audits.build_report=3600:3900,…" changes some.
try:
    TASK_TIME_LIMITS = {**TIME_LIMITS, **parse_time_limits(env_str("TASK_TIME_LIMITS", ""))}
except ValueError as exc:
    raise ImproperlyConfigured(f"TASK_TIME_LIMITS: {exc}") from exc
CELERY_TASK_ANNOTATIONS = task_annotations(TASK_TIME_LIMITS)
CELERY_TASK_SOFT_TIME_LIMIT = DEFAULT_LIMIT.soft
CELERY_TASK_TIME_LIMIT = DEFAULT_LIMIT.hard
# Pages enqueue tasks (an acknowledgement's notifications, a report): a Redis that stopped
# answering must fail that enqueue within seconds, never hold the request. The worker's own
# blocking pops wait 1 s, well within the read timeout.
CELERY_BROKER_TRANSPORT_OPTIONS = {"socket_timeout": 3, "socket_connect_timeout": 2}
CELERY_BROKER_CONNECTION_TIMEOUT = 2
CELERY_TASK_PUBLISH_RETRY_POLICY = {
    "max_retries": 1,
    "interval_start": 0,
    "interval_step": 0.2,
    "interval_max": 0.2,
}
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")
CELERY_BEAT_SCHEDULE = {
    "spans.ensure-partitions": {
        "task": "spans.ensure_partitions",
        "schedule": 3600.0,
        "options": {"expires": 3000},
    },
    "spans.drop-expired-partitions": {
        "task": "spans.drop_expired_partitions",
        "schedule": 3600.0,
        "options": {"expires": 3000},
    },
    "retention.thin-spans": {
        "task": "retention.thin_spans",
        "schedule": 3600.0,
        "options": {"expires": 3000},
    },
    "rollups.fold": {"task": "rollups.fold", "schedule": 5.0, "options": {"expires": 4}},
    "rollups.compact": {"task": "rollups.compact", "schedule": 300.0, "options": {"expires": 240}},
    "rollups.stage-shares": {
        "task": "rollups.stage_shares",
        "schedule": 60.0,
        "options": {"expires": 50},
    },
    # At the start of each hour: a same-hours-of-day baseline is built for the hour ahead.
    "alerts.compute-baselines": {
        "task": "alerts.compute_baselines",
        "schedule": crontab(minute=0),
        "options": {"expires": 3000},
    },
    "alerts.evaluate": {"task": "alerts.evaluate", "schedule": 60.0, "options": {"expires": 50}},
    # Transitions enqueue their own send after commit; this picks up retries as they fall due.
    "alerts.send-deliveries": {
        "task": "alerts.send_deliveries",
        "schedule": 10.0,
        "options": {"expires": 9},
    },
}

# ----- Ingest ------------------------------------------------------------------------------------
INGEST_HTTP_PORT = env_int("INGEST_HTTP_PORT", 4318, minimum=1, maximum=65535)
INGEST_GRPC_PORT = env_int("INGEST_GRPC_PORT", 4317, minimum=1, maximum=65535)
INGEST_MAX_BODY_BYTES = env_int("INGEST_MAX_BODY_BYTES", 64 * 1024 * 1024, minimum=1024)
# OTLP/JSON bodies are parsed whole into Python objects (about 12x their size) before any
# limit applies, so they get a smaller cap than protobuf ones.
INGEST_MAX_JSON_BODY_BYTES = env_int("INGEST_MAX_JSON_BODY_BYTES", 16 * 1024 * 1024, minimum=1024)
# A request body must arrive whole within this time (3x the OTel SDKs' 10 s export timeout:
# a client slower than that has already given up); past it the listener answers 408.
INGEST_BODY_TIMEOUT_SECONDS = env_int("INGEST_BODY_TIMEOUT_SECONDS", 30, minimum=1)
# Request bytes one ingest process holds at once (bodies being read or decoded), counted as
# they arrive; past it new bodies get 503 + Retry-After, so memory stays bounded.
INGEST_MAX_INFLIGHT_BYTES = env_int("INGEST_MAX_INFLIGHT_BYTES", 256 * 1024 * 1024, minimum=1024)
# After its first 5 s a body must keep arriving at this many bytes a second on average, else
# 408 (0: no minimum): a trickling upload cannot hold a connection for the whole timeout.
INGEST_MIN_BODY_BYTES_PER_SECOND = env_int("INGEST_MIN_BODY_BYTES_PER_SECOND", 16384, minimum=0)
# A request's line and headers must arrive within this time of the connection opening (or of
# its first byte on a kept-alive connection), else the connection is closed.
INGEST_HEADER_TIMEOUT_SECONDS = env_int("INGEST_HEADER_TIMEOUT_SECONDS", 10, minimum=1)
# An OTLP/gRPC Export's message must arrive within this time of the call, else the call is
# cancelled and its handler thread freed.
INGEST_GRPC_MESSAGE_TIMEOUT_SECONDS = env_int("INGEST_GRPC_MESSAGE_TIMEOUT_SECONDS", 10, minimum=1)
# The share of one ingest process's bytes in flight and gRPC handler slots one team may hold
# while another team waits for room (a team alone may use them all); beyond it that team gets
# 429 / RESOURCE_EXHAUSTED, and the waiting team finds room.
INGEST_TEAM_SHARE_PERCENT = env_int("INGEST_TEAM_SHARE_PERCENT", 50, minimum=1, maximum=100)
# How long an export within its team's share waits for room in a full process (bytes in flight,
# gRPC handler slots) before it gets 503 / UNAVAILABLE with Retry-After.
INGEST_ROOM_WAIT_SECONDS = env_int("INGEST_ROOM_WAIT_SECONDS", 5, minimum=0)
# The Retry-After (and gRPC RetryInfo) of an export refused for room or a share (429 / 503).
INGEST_RETRY_AFTER_SECONDS = env_int("INGEST_RETRY_AFTER_SECONDS", 2, minimum=1, maximum=3600)
# Span attribute limits (see ingest/limits.py), after the OTel SDK's: attributes past the count
# or the size budget are dropped and counted, longer strings truncated, arrays and key-value
# lists cut to a number of elements, values nested deeper than the depth stored as null.
INGEST_ATTRIBUTE_COUNT_LIMIT = env_int("INGEST_ATTRIBUTE_COUNT_LIMIT", 128, minimum=0)
INGEST_ATTRIBUTE_VALUE_LENGTH_LIMIT = env_int(
    "INGEST_ATTRIBUTE_VALUE_LENGTH_LIMIT", 1024, minimum=0
)
INGEST_ATTRIBUTE_ITEMS_LIMIT = env_int("INGEST_ATTRIBUTE_ITEMS_LIMIT", 1024, minimum=0)
INGEST_ATTRIBUTE_DEPTH_LIMIT = env_int("INGEST_ATTRIBUTE_DEPTH_LIMIT", 8, minimum=0, maximum=64)
INGEST_SPAN_ATTRIBUTES_SIZE_LIMIT = env_int(
    "INGEST_SPAN_ATTRIBUTES_SIZE_LIMIT", 64 * 1024, minimum=0
)
# Span events (exceptions, Triton's QUEUE_START/COMPUTE_*) kept per span and attributes kept per
# event, after the OTel SDK's OTEL_SPAN_EVENT_COUNT_LIMIT and OTEL_EVENT_ATTRIBUTE_COUNT_LIMIT.
INGEST_SPAN_EVENT_COUNT_LIMIT = env_int("INGEST_SPAN_EVENT_COUNT_LIMIT", 128, minimum=0)
INGEST_EVENT_ATTRIBUTE_COUNT_LIMIT = env_int("INGEST_EVENT_ATTRIBUTE_COUNT_LIMIT", 128, minimum=0)
INGEST_THREADS = env_int("INGEST_THREADS", 8, minimum=1, maximum=64)
INGEST_PROCESSES = env_int("INGEST_PROCESSES", 1, minimum=1, maximum=64)
# Ingest hosts (containers running python -m ingest) that one token's traffic is spread over:
# each enforces a token's rate limit on its own, so each allows rate_limit / INGEST_HOSTS.
INGEST_HOSTS = env_int("INGEST_HOSTS", 1, minimum=1, maximum=1000)

# ----- Team limits -------------------------------------------------------------------------------
# Pipelines (service.name x environment) one team may have: spans of a further one are refused
# and reported in the export's partial_success, so 20,000 service names cannot make 20,000
# pipelines. New pipelines keep at most PIPELINE_MAX_STAGES stages (Admin changes one's own).
TEAM_MAX_PIPELINES = env_int("TEAM_MAX_PIPELINES", 200, minimum=1)
PIPELINE_MAX_STAGES = env_int("PIPELINE_MAX_STAGES", 32, minimum=1, maximum=1000)
# Values of one cohort attribute (model.version…) kept apart per pipeline and UTC day; spans
# with further values count as "other", so a high-cardinality attribute cannot blow up storage.
COHORT_VALUES_PER_DAY = env_int("COHORT_VALUES_PER_DAY", 20, minimum=1)

# ----- Web ---------------------------------------------------------------------------------------
# Heavy reads (series endpoints, compare, trace search, Prometheus queries, the overview) one
# team may run at once in all web processes together (advisory locks in PostgreSQL); beyond it
# 429 with Retry-After (fairness/heavy_reads.py), so one team's many long queries cannot slow the
# other teams' pages.
WEB_TEAM_MAX_HEAVY_REQUESTS = env_int("WEB_TEAM_MAX_HEAVY_REQUESTS", 1, minimum=1, maximum=1000)
# How long a heavy read beyond that bound waits for a slot (no CPU) before its 429.
WEB_HEAVY_WAIT_SECONDS = env_int("WEB_HEAVY_WAIT_SECONDS", 5, minimum=0)
# While other teams use a web process, a team whose heavy reads took more than this share of
# its last ~10 s there keeps its slot for a rest after each read, so its reads run at most this
# share of the time (fairness/heavy_read_time.py): back to back they would slow the others' pages.
WEB_TEAM_HEAVY_SHARE_PERCENT = env_int("WEB_TEAM_HEAVY_SHARE_PERCENT", 10, minimum=1, maximum=100)
# Any statement of the web process (pages, API, live sockets) is cancelled after this long (0:
# never) and answered 503 with Retry-After: no read holds a connection and a core for minutes.
WEB_STATEMENT_TIMEOUT_SECONDS = env_int("WEB_STATEMENT_TIMEOUT_SECONDS", 30, minimum=0)
# Connections of a web process to each database, pooled (0: a new one per request, as Django
# serves each ASGI request on a thread of its own); a request waits this long for one when all
# are in use, then gets 503 with Retry-After.
WEB_DB_POOL_SIZE = env_int("WEB_DB_POOL_SIZE", 32, minimum=0, maximum=1000)
WEB_DB_POOL_WAIT_SECONDS = env_int("WEB_DB_POOL_WAIT_SECONDS", 10, minimum=1)
# Requests of one team in progress at once in a web process (each holds a thread and, heavy
# reads waiting for their slot included, a pooled connection); beyond, 429 with Retry-After at
# once, so one team cannot take a process's pool. Keep it well under WEB_DB_POOL_SIZE.
WEB_TEAM_MAX_REQUESTS = env_int("WEB_TEAM_MAX_REQUESTS", 12, minimum=1, maximum=1000)
# The Retry-After of a web request refused by a team's bound above (429), and of one refused
# while PostgreSQL cannot be reached (503).
WEB_RETRY_AFTER_SECONDS = env_int("WEB_RETRY_AFTER_SECONDS", 1, minimum=1, maximum=3600)
WEB_UNAVAILABLE_RETRY_AFTER_SECONDS = env_int(
    "WEB_UNAVAILABLE_RETRY_AFTER_SECONDS", 10, minimum=1, maximum=3600
)

# ----- Retention and rollups ---------------------------------------------------------------------
RETENTION_DAYS = env_int("RETENTION_DAYS", 30, minimum=1)
# Raw spans are kept whole for SPAN_HOT_DAYS; an older day keeps only its traces with an error,
# those slower than their minute's p99, and SPAN_SAMPLE_PERCENT of the rest. The p99 comes from
# the minute rollups, so they must outlive the hot period (see ROLLUP_MINUTE_DAYS).
SPAN_HOT_DAYS = env_int("SPAN_HOT_DAYS", 2, minimum=1)
SPAN_SAMPLE_PERCENT = env_int("SPAN_SAMPLE_PERCENT", 5, minimum=0, maximum=100)
PARTITIONS_AHEAD_DAYS = env_int("PARTITIONS_AHEAD_DAYS", 3, minimum=1, maximum=60)
# Rollup rows kept per resolution: minutes are compacted into hours, hours into days first.
ROLLUP_MINUTE_DAYS = env_int("ROLLUP_MINUTE_DAYS", 4, minimum=1)
# A day is thinned SPAN_HOT_DAYS after its end, when its first minute is a day older still:
# its minute rollups must last that long, plus a day for the thinner to get to it. With
# SPAN_HOT_DAYS at or past RETENTION_DAYS no day is ever thinned, and nothing is asked.
if SPAN_HOT_DAYS < RETENTION_DAYS and SPAN_HOT_DAYS + 2 > ROLLUP_MINUTE_DAYS:
    raise ImproperlyConfigured(
        f"ROLLUP_MINUTE_DAYS={ROLLUP_MINUTE_DAYS} must be at least SPAN_HOT_DAYS + 2 "
        f"({SPAN_HOT_DAYS + 2}): thinning a day reads the p99 of its minutes"
    )
ROLLUP_HOUR_DAYS = env_int("ROLLUP_HOUR_DAYS", 90, minimum=1)
ROLLUP_DAY_DAYS = env_int("ROLLUP_DAY_DAYS", 400, minimum=1)
# Stage shares of a minute are computed this long after it ends, so that the spans of its
# requests have arrived; spans stored later are left out of the shares (not of the rollups).
STAGE_SHARE_GRACE_SECONDS = env_int("STAGE_SHARE_GRACE_SECONDS", 120, minimum=0)
# The kind of work of stages whose names do not say it (model_forward is compute by its name),
# for the bottleneck class: "stage=kind,…" with kinds compute, feature, queue and network.
try:
    BOTTLENECK_STAGE_KINDS = parse_stage_kinds(env_str("BOTTLENECK_STAGE_KINDS", ""))
except ValueError as exc:
    raise ImproperlyConfigured(f"BOTTLENECK_STAGE_KINDS: {exc}") from exc

# ----- Alerts and notifications ------------------------------------------------------------------
# A baseline merges the same hours of the day of the previous ALERT_BASELINE_DAYS days, or the
# trailing days while those hours hold too little (latencyboard/alerts/baselines.py); below the
# minimum count a stage's baseline is "not ready" and raises no regression alert (10,000
# requests hold 100 values above their p99).
ALERT_BASELINE_DAYS = env_int("ALERT_BASELINE_DAYS", 7, minimum=1, maximum=90)
ALERT_BASELINE_MIN_COUNT = env_int("ALERT_BASELINE_MIN_COUNT", 10_000, minimum=100)
# An open alert resolves after this many clean evaluations (minutes) in a row.
# The confidence of the intervals an alert quotes as its evidence (baseline, window and the
# change); the page says the level. Whether a rule fires is decided at its own significance.
ALERT_EVIDENCE_CONFIDENCE_PERCENT = env_int(
    "ALERT_EVIDENCE_CONFIDENCE_PERCENT", 95, minimum=50, maximum=99
)
ALERT_CLEAN_EVALUATIONS = env_int("ALERT_CLEAN_EVALUATIONS", 5, minimum=1, maximum=1440)
# Notification attempts per delivery (429, 5xx and timeouts are retried with backoff).
ALERT_DELIVERY_MAX_ATTEMPTS = env_int("ALERT_DELIVERY_MAX_ATTEMPTS", 8, minimum=1, maximum=50)
# One wall-clock deadline per attempt: connecting, TLS, sending and reading the answer.
ALERT_DELIVERY_TIMEOUT_SECONDS = env_int(
    "ALERT_DELIVERY_TIMEOUT_SECONDS", 10, minimum=1, maximum=60
)
# Deliveries in flight at once: the notifier workers' processes together (`--concurrency` of
# the worker on the "notifications" queue; 2 as `make run` and compose start it). A team holds
# one of them while another team has a delivery due, and the last free one is kept for a team
# that falls due (latencyboard/fairness/delivery_slots.py).
NOTIFICATION_SLOTS = env_int("NOTIFICATION_SLOTS", 2, minimum=1, maximum=256)
# Notifications reach public addresses only (see latencyboard/notifications/transport.py).
# Networks listed here are allowed besides, for receivers inside your network: CIDRs or single
# addresses, comma-separated ("10.20.0.0/16,fd12::7"). Cloud metadata addresses never are.
try:
    NOTIFICATION_ALLOWED_NETWORKS = parse_networks(env_list("NOTIFICATION_ALLOWED_NETWORKS"))
except BadNetworkError as exc:
    raise ImproperlyConfigured(f"NOTIFICATION_ALLOWED_NETWORKS: {exc}") from exc

# Alert e-mails (notification channels of kind "email"), sent through this SMTP server, or
# printed on the console with EMAIL_TO_CONSOLE (its default: DEBUG on and no EMAIL_HOST).
# `make run` (DEBUG off too) sets EMAIL_TO_CONSOLE when no EMAIL_HOST is given.
EMAIL_HOST = env_str("EMAIL_HOST")
EMAIL_TO_CONSOLE = env_bool("EMAIL_TO_CONSOLE", DEBUG and not EMAIL_HOST)
EMAIL_BACKEND = (
    "django.core.mail.backends.console.EmailBackend"
    if EMAIL_TO_CONSOLE
    else "django.core.mail.backends.smtp.EmailBackend"
)
EMAIL_HOST = EMAIL_HOST or "localhost"
EMAIL_PORT = env_int("EMAIL_PORT", 25, minimum=1, maximum=65535)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER")
EMAIL_HOST_PASSWORD = env_str("EMAIL_HOST_PASSWORD")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
EMAIL_USE_SSL = env_bool("EMAIL_USE_SSL", False)
if EMAIL_USE_TLS and EMAIL_USE_SSL:
    raise ImproperlyConfigured("EMAIL_USE_TLS and EMAIL_USE_SSL exclude each other: set one")
EMAIL_TIMEOUT = env_int("EMAIL_TIMEOUT_SECONDS", 10, minimum=1, maximum=300)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "latencyboard@localhost")

# ----- Audit reports -----------------------------------------------------------------------------
# Reports one team may have queued or building at once: a script requesting in a loop must not
# hold the reports worker from every other team.
AUDIT_MAX_PENDING_REPORTS = env_int("AUDIT_MAX_PENDING_REPORTS", 4, minimum=1, maximum=100)
# Beyond it the refusal's Retry-After is when the oldest waiting report should be done, by the
# team's recent reports; this many seconds for a team with none done yet.
AUDIT_REPORT_RETRY_AFTER_SECONDS = env_int(
    "AUDIT_REPORT_RETRY_AFTER_SECONDS", 60, minimum=1, maximum=86_400
)

LOG_LEVEL = env_str("LOG_LEVEL", "INFO").upper()
if LOG_LEVEL not in {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"}:
    raise ImproperlyConfigured(f"LOG_LEVEL={LOG_LEVEL!r} is not a log level (DEBUG…CRITICAL)")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    # httpx logs every request's URL at INFO: a Slack webhook URL is a secret.
    "loggers": {"httpx": {"level": "WARNING"}, "httpcore": {"level": "WARNING"}},
}
