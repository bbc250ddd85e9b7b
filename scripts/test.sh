#!/usr/bin/env bash
# Run the test suite on PostgreSQL and Redis, starting them when they are
# installed but stopped. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

# Checkouts sharing a machine (and CI beside them) get a database and cache prefix
# of their own, named after the checkout's path.
checkout=$(printf %s "$PWD" | sha1sum | cut -c1-8)
export DATABASE_URL=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/flywheel_$checkout}
export FLYWHEEL_CACHE_PREFIX=${FLYWHEEL_CACHE_PREFIX:-test_$checkout}
export REDIS_URL=${REDIS_URL:-redis://127.0.0.1:6379}
export CACHE_URL=${CACHE_URL:-$REDIS_URL/1}
export CELERY_BROKER_URL=${CELERY_BROKER_URL:-$REDIS_URL/2}
export FLYWHEEL_VAR_DIR=${FLYWHEEL_VAR_DIR:-$PWD/var/test}
# Tasks enqueued by the code (retraining when examples change) run in the test itself:
# no worker consumes this Redis, which other checkouts share.
export CELERY_TASK_ALWAYS_EAGER=${CELERY_TASK_ALWAYS_EAGER:-true}
# A test reaches only the backends it mocks: registering one does not probe it, except
# in the tests of that (tests/scenarios/test_onboarding.py), which mock what it asks.
export FLYWHEEL_ONBOARD_NEW_BACKENDS=${FLYWHEEL_ONBOARD_NEW_BACKENDS:-false}

.venv/bin/python scripts/ensure_services.py
scripts/ensure_browser.sh
# The suite runs on every core, a test file per worker at a time (pytest-xdist, with a
# database, cache prefix and var directory per worker: tests/parallel.py); TEST_WORKERS=0
# runs it in this process. tests.parallel must load before Django reads its settings.
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
exec .venv/bin/pytest -p tests.parallel -n "${TEST_WORKERS:-$(nproc)}" --dist loadfile "$@"
