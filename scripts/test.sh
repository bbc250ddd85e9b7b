#!/usr/bin/env bash
# Run the test suite on PostgreSQL and Redis, starting them when they are
# installed but stopped. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

export DATABASE_URL=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/flywheel}
export REDIS_URL=${REDIS_URL:-redis://127.0.0.1:6379}
export CACHE_URL=${CACHE_URL:-$REDIS_URL/1}
export CELERY_BROKER_URL=${CELERY_BROKER_URL:-$REDIS_URL/2}
export FLYWHEEL_VAR_DIR=${FLYWHEEL_VAR_DIR:-$PWD/var/test}

.venv/bin/python scripts/ensure_services.py
exec .venv/bin/pytest "$@"
