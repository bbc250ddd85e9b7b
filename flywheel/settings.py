"""Django settings for Flywheel.

Every value that varies between deployments is read here, and only here, from
the environment (see ``.env.example`` and docs/configuration.md).
A bad value stops start-up with a message naming the variable.
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

from flywheel.env import (
    as_bool,
    as_cache,
    as_choice,
    as_database,
    as_fraction,
    as_json_object,
    as_list,
    as_networks,
    as_positive_float,
    as_positive_int,
    as_rate,
    as_url,
    read,
)

BASE_DIR = Path(__file__).resolve().parent.parent

# --- Paths -------------------------------------------------------------------
# var/ holds everything a zero-setup run writes: SQLite, the file cache, the
# broker's SQLite file, the decision spool and a generated secret key.
VAR_DIR = read("FLYWHEEL_VAR_DIR", Path, BASE_DIR / "var")
VAR_DIR.mkdir(parents=True, exist_ok=True)


def _generated_secret_key() -> str:
    """Keep one random key per installation so sessions survive restarts."""
    path = VAR_DIR / "secret_key"
    if not path.exists():
        path.write_text(secrets.token_urlsafe(50))
        path.chmod(0o600)
    return path.read_text().strip()


# --- Core ----------------------------------------------------------------------
DEBUG = read("DJANGO_DEBUG", as_bool, False)
SECRET_KEY = read("DJANGO_SECRET_KEY", str, "") or _generated_secret_key()
ALLOWED_HOSTS = read("DJANGO_ALLOWED_HOSTS", as_list, ["127.0.0.1", "localhost"])
CSRF_TRUSTED_ORIGINS: list[str] = read("DJANGO_CSRF_TRUSTED_ORIGINS", as_list, [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_celery_beat",
    "flywheel",
    "backends",
    "chatflows",
    "routing",
    "analytics",
    "agents",
    "dialects",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

# The API needs none of the browser middleware (see flywheel/asgi.py).
API_MIDDLEWARE: list[str] = []

ROOT_URLCONF = "flywheel.urls"
WSGI_APPLICATION = "flywheel.wsgi.application"
ASGI_APPLICATION = "flywheel.asgi.application"

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

# --- Database ------------------------------------------------------------------
# PostgreSQL in every real deployment and in the test suite; SQLite under var/
# only as the zero-setup default of `make run`.
DATABASES = {
    "default": read(
        "DATABASE_URL", as_database, as_database(f"sqlite:///{VAR_DIR}/flywheel.sqlite3")
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Web, worker and beat share one file: WAL lets readers run beside the
    # writer, the busy timeout makes a writer wait instead of failing, and
    # IMMEDIATE transactions take the write lock up front (no upgrade deadlock).
    DATABASES["default"]["OPTIONS"] = {
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        "timeout": 20,
        "transaction_mode": "IMMEDIATE",
    }
else:
    # A connection pool rather than persistent connections: under ASGI each
    # request's database work runs in a thread of its own, so a per-thread
    # persistent connection would mean a new connection for every request.
    # The pool checks each connection as it hands it out (CONN_HEALTH_CHECKS: one
    # empty round trip): after a database restart the idle ones are dead, and
    # none may reach a request.
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
    DATABASES["default"]["ENGINE"] = "flywheel.postgres"  # Django's, told of outages
    DATABASES["default"]["OPTIONS"] = {
        "pool": {
            "min_size": read("DATABASE_POOL_MIN", as_positive_int, 2),
            "max_size": read("DATABASE_POOL_MAX", as_positive_int, 20),
            # A request waits this long for a connection: an outage must not hold the
            # executor's threads (flywheel/outage.py fails the rest at once).
            "timeout": read("DATABASE_POOL_TIMEOUT", as_positive_float, 5.0),
        }
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
# Every decision is appended here before its answer goes out, and replayed from
# here if its process dies before the database has it (routing/recording/spool.py).
SPOOL_DIR = read("FLYWHEEL_SPOOL_DIR", Path, VAR_DIR / "spool")

# --- Cache (shared by every process: the routing hot path reads it) ------------
# Redis in real deployments and tests; with none configured, a file cache under
# var/ so web, worker and beat still see the same entries.
CACHES = {
    "default": read("CACHE_URL", as_cache, as_cache(f"filecache://{VAR_DIR}/cache")),
}

# --- Celery --------------------------------------------------------------------
# With none configured, kombu's SQLAlchemy transport on a SQLite file of its own:
# no server, and (unlike the filesystem transport, whose JSON reads race with its
# writes and once stopped `make run`'s worker) a transaction per message.
CELERY_BROKER_URL = read("CELERY_BROKER_URL", as_url, f"sqla+sqlite:///{VAR_DIR}/broker.sqlite3")
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_SOFT_TIME_LIMIT = read("CELERY_TASK_SOFT_TIME_LIMIT", as_positive_int, 60)
CELERY_TASK_TIME_LIMIT = read("CELERY_TASK_TIME_LIMIT", as_positive_int, 90)
CELERY_TASK_ALWAYS_EAGER = read("CELERY_TASK_ALWAYS_EAGER", as_bool, False)
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
CELERY_TIMEZONE = "UTC"

# --- Auth, i18n, static ----------------------------------------------------------
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
STATIC_ROOT = VAR_DIR / "static"
SERVE_STATIC = read("FLYWHEEL_SERVE_STATIC", as_bool, True)
LOGIN_URL = "admin:login"

# --- REST API ------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["flywheel.authentication.ApiKeyAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["flywheel.jsonin.StrictJSONParser"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "flywheel.errors.api_exception_handler",
    "UNAUTHENTICATED_USER": None,
}
_SYSTEM_FONTS = 'system-ui, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif'
_SYSTEM_MONOSPACE_FONTS = 'ui-monospace, Menlo, Consolas, "Liberation Mono", monospace'
SPECTACULAR_SETTINGS = {
    "TITLE": "Flywheel API",
    "DESCRIPTION": "One front door for questions answered by Flowise and Langflow flows.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.AllowAny"],
    "SERVE_AUTHENTICATION": [],
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # The docs work offline: Redoc's theme uses the system's fonts, not Google Fonts
    # (templates/drf_spectacular/redoc.html leaves out the page's links to them).
    "REDOC_UI_SETTINGS": {
        "theme": {
            "typography": {
                "fontFamily": _SYSTEM_FONTS,
                "headings": {"fontFamily": _SYSTEM_FONTS},
                "code": {"fontFamily": _SYSTEM_MONOSPACE_FONTS},
            }
        }
    },
    # Request and response components apart: a request states what the server
    # refuses (read-only fields left out, minLength on fields that may not be blank).
    "COMPONENT_SPLIT_REQUEST": True,
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "routing.openapi.add_query_endpoints",
        "chatflows.openapi.add_chatflow_endpoints",
        "dialects.openapi.add_openai_endpoints",
        "flywheel.openapi.add_constraints",
        "flywheel.openapi.add_error_responses",
    ],
}

# --- Logging (stderr only: stdout belongs to the MCP stdio protocol) -----------
LOG_LEVEL = read(
    "FLYWHEEL_LOG_LEVEL", as_choice("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"), "INFO"
)
# text: readable lines; json: one JSON object per line (flywheel/logs.py). Both name the
# request id of the query a line belongs to.
LOG_FORMAT = read("FLYWHEEL_LOG_FORMAT", as_choice("TEXT", "JSON"), "TEXT").lower()
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"request_id": {"()": "flywheel.logs.RequestIdFilter"}},
    "formatters": {
        "text": {"format": "%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s"},
        "json": {"()": "flywheel.logs.JsonFormatter"},
    },
    "handlers": {
        "stderr": {
            "class": "logging.StreamHandler",
            "stream": "ext://sys.stderr",
            "formatter": LOG_FORMAT,
            "filters": ["request_id"],
        }
    },
    "root": {"handlers": ["stderr"], "level": LOG_LEVEL},
    # One line per backend request is noise at INFO; failures are logged by the services.
    "loggers": {"httpx": {"level": "WARNING"}, "httpcore": {"level": "WARNING"}},
}

# --- Limits: what a backend sends, what is kept of it ----------------------------
# The most of a flow's answer (whole or streamed, decompressed) Flywheel reads: past it
# the attempt fails as that backend's and the query falls back (backends/http/limits.py).
MAX_ANSWER_BYTES = read("FLYWHEEL_MAX_ANSWER_BYTES", as_positive_int, 2 * 1024 * 1024)
# The most of an answer kept in a conversation's turn, its cached recent turns and the
# decision spool; the caller still receives the whole answer.
MAX_STORED_ANSWER_CHARS = read("FLYWHEEL_MAX_STORED_ANSWER_CHARS", as_positive_int, 65_536)
# Earlier exchanges sent along to a backend (and the answers a summary condenses): the
# newest first, up to this many characters together.
HISTORY_BUDGET_CHARS = read("FLYWHEEL_HISTORY_BUDGET_CHARS", as_positive_int, 32_000)
# --- Retention: how long the raw rows of each question are kept -----------------------
# Decisions, performance records, turns and idle sessions older than this many days are
# dropped (beat, analytics.retention); the hourly rollups keep the history beyond it.
RETENTION_DAYS = read("FLYWHEEL_RETENTION_DAYS", as_positive_int, 30)
# On PostgreSQL those tables are partitioned by day; beat makes this many days ahead.
PARTITIONS_AHEAD_DAYS = read("FLYWHEEL_PARTITIONS_AHEAD_DAYS", as_positive_int, 3)
# Beat packs the indexes of the days that have passed (hourly): a run starts no rebuild
# past this many seconds, and cancels one still going then (tried again next run).
PACK_SECONDS = read("FLYWHEEL_PACK_SECONDS", as_positive_int, 1800)
# A decision spool segment is closed past this many bytes (or 1,000 decisions).
SPOOL_SEGMENT_BYTES = read("FLYWHEEL_SPOOL_SEGMENT_BYTES", as_positive_int, 64 * 1024 * 1024)
# When neither the spool nor the database can keep an answer's decision, the question is
# refused (503); on, it is answered and its decision waits in memory for the database
# (while memory has room).
ANSWER_UNRECORDED = read("FLYWHEEL_ANSWER_UNRECORDED", as_bool, False)
# The decisions waiting for the database that memory holds, by their spooled size; past
# it they wait in the spool alone and are read back in order (routing/recording/backlog.py).
WRITER_MEMORY_BYTES = read("FLYWHEEL_WRITER_MEMORY_MB", as_positive_int, 8) * 1024 * 1024
# Discovery asks for at most this many pages of 100 flows, and takes at most this many
# flows in all; past either it fails, naming the backend and the limit.
DISCOVERY_MAX_PAGES = read("FLYWHEEL_DISCOVERY_MAX_PAGES", as_positive_int, 100)
DISCOVERY_MAX_FLOWS = read("FLYWHEEL_DISCOVERY_MAX_FLOWS", as_positive_int, 10_000)
# A flow record's text fields (its description, its dates) and its flowData, in UTF-8
# bytes; a record past them is refused (its id, name and type have the Flow row's widths).
RECORD_FIELD_MAX_BYTES = read("FLYWHEEL_RECORD_FIELD_MAX_BYTES", as_positive_int, 64 * 1024)
FLOW_DATA_MAX_BYTES = read("FLYWHEEL_FLOW_DATA_MAX_BYTES", as_positive_int, 4 * 1024 * 1024)

# --- Flywheel --------------------------------------------------------------------
# How long /readyz waits for each dependency before calling it down.
READINESS_TIMEOUT_SECONDS = read("FLYWHEEL_READINESS_TIMEOUT", as_positive_float, 1.5)
# /metrics answers a bearer of this token; unset, it answers only requests from this host.
METRICS_TOKEN = read("FLYWHEEL_METRICS_TOKEN", str, "")
# A backend registered through REST, the admin or add_backend is probed and its flows
# discovered at once, so it can answer without waiting for beat. False leaves that to
# beat's next run (registering many at once; the test suite, which mocks each backend).
ONBOARD_NEW_BACKENDS = read("FLYWHEEL_ONBOARD_NEW_BACKENDS", as_bool, True)
# Public base URL, for links returned in answers (the trace page). Empty: the request's host.
PUBLIC_URL = read("FLYWHEEL_PUBLIC_URL", as_url, "").rstrip("/")

# Optional LLM for classification: any OpenAI-compatible endpoint. Unset: rules only.
LLM_BASE_URL = read("LLM_BASE_URL", as_url, "")
LLM_API_KEY = read("LLM_API_KEY", str, "")
LLM_MODEL = read("LLM_MODEL", str, "gpt-4o-mini")
LLM_TIMEOUT_SECONDS = read("LLM_TIMEOUT_SECONDS", as_positive_float, 2.0)

# Optional: nearest examples by embedding vote with the learned classifiers, through any
# OpenAI-compatible /embeddings endpoint. Unset: the learned model alone.
EMBEDDINGS_BASE_URL = read("EMBEDDINGS_BASE_URL", as_url, "")
EMBEDDINGS_API_KEY = read("EMBEDDINGS_API_KEY", str, "")
EMBEDDINGS_MODEL = read("EMBEDDINGS_MODEL", str, "text-embedding-3-small")
EMBEDDINGS_TIMEOUT_SECONDS = read("EMBEDDINGS_TIMEOUT_SECONDS", as_positive_float, 1.0)

# The chat model Flowise's AgentFlow V2 generator uses (seed 003's generate_agentflow_v2):
# Flowise's ``selectedChatModel``, e.g. {"name": "chatOpenAI", "inputs": {"modelName":
# "gpt-4o-mini", "credential": "<a Flowise credential id>"}}. It is sent only to shared
# Flowise backends. Unset: generation answers a ValidationError saying so.
FLOWISE_GENERATOR_MODEL: dict[str, Any] = read("FLOWISE_GENERATOR_MODEL", as_json_object, {})

# Seed 004: GLOBAL / LOCAL / HYBRID query-type routing, off by default. Below the
# threshold the LLM decides when QUERY_ROUTING_USE_LLM is on and LLM_BASE_URL is
# set (with its own model, LLM_MODEL by default); otherwise the answer is HYBRID.
QUERY_ROUTING_ENABLED = read("QUERY_ROUTING_ENABLED", as_bool, False)
QUERY_ROUTING_USE_LLM = read("QUERY_ROUTING_USE_LLM", as_bool, False)
QUERY_ROUTING_LLM_MODEL = read("QUERY_ROUTING_LLM_MODEL", str, "") or LLM_MODEL
QUERY_ROUTING_CONFIDENCE_THRESHOLD = read("QUERY_ROUTING_CONFIDENCE_THRESHOLD", as_fraction, 0.7)

# --- Security ----------------------------------------------------------------------
# Backends registered with a tenant's API key may not point at loopback, private,
# link-local, multicast, reserved or unspecified addresses, except inside these
# networks (comma-separated CIDRs). Staff-registered backends (admin, commands) may.
BACKEND_ALLOWED_NETWORKS: list[str] = read("FLYWHEEL_BACKEND_ALLOWED_NETWORKS", as_networks, [])
# Requests per API key, across every door and worker process (shared through the
# cache); "off" turns the limit off. Each key may carry its own in the admin.
_DEFAULT_RATE_LIMIT: tuple[int, int] | None = (1200, 60)
RATE_LIMIT = read("FLYWHEEL_RATE_LIMIT", as_rate, _DEFAULT_RATE_LIMIT)
# The reverse proxies (comma-separated addresses or CIDRs) whose X-Forwarded-For and
# X-Forwarded-Proto are believed (flywheel/serving.py); from anyone else they are ignored.
TRUSTED_PROXIES: list[str] = read("FLYWHEEL_TRUSTED_PROXIES", as_networks, [])
# What the server reads of a request (flywheel/serving.py, flywheel/readlimits.py): its
# headers must be in within HEADER_TIMEOUT seconds of the connection opening or of the
# request's first byte (else 408), its body within BODY_TIMEOUT seconds of the headers
# (else 408) and no larger than MAX_BODY_BYTES (else 413, refused by Content-Length
# before any of it is read). The largest body Flywheel takes is a flow's flowData (under
# 1 MB, escaped inside a JSON document); Django's own limit is the same number.
HEADER_TIMEOUT_SECONDS = read("FLYWHEEL_HEADER_TIMEOUT", as_positive_float, 10.0)
BODY_TIMEOUT_SECONDS = read("FLYWHEEL_BODY_TIMEOUT", as_positive_float, 30.0)
MAX_BODY_BYTES = read("FLYWHEEL_MAX_BODY_BYTES", as_positive_int, 2_621_440)  # 2.5 MiB
DATA_UPLOAD_MAX_MEMORY_SIZE = MAX_BODY_BYTES
# Failed authentications per client address before it is told to wait.
_DEFAULT_AUTH_FAILURE_LIMIT: tuple[int, int] | None = (30, 60)
AUTH_FAILURE_LIMIT = read("FLYWHEEL_AUTH_FAILURE_LIMIT", as_rate, _DEFAULT_AUTH_FAILURE_LIMIT)
