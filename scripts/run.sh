#!/usr/bin/env bash
# Serve Flywheel on one machine: web (uvicorn), Celery worker and beat.
# With no DATABASE_URL / CACHE_URL / CELERY_BROKER_URL set, everything lives
# under var/ (SQLite, a file cache, a broker on SQLite): no server needed.
# Ctrl-C stops all three; a worker or beat that crashes is started again.
set -euo pipefail
cd "$(dirname "$0")/.."

HOST=${HOST:-127.0.0.1}
PORT=${PORT:-8000}
BIN=.venv/bin

$BIN/python manage.py migrate --noinput -v 0
$BIN/python manage.py load_defaults
$BIN/python manage.py bootstrap --url "http://$HOST:$PORT"

pids=()
stop() {
    trap - INT TERM EXIT
    echo "Stopping Flywheel..." >&2
    kill -TERM "${pids[@]}" 2>/dev/null || true
    wait "${pids[@]}" 2>/dev/null || true
}
trap stop INT TERM EXIT

# The worker and beat come back by themselves if they crash (scripts/supervise.sh).
scripts/supervise.sh $BIN/celery -A flywheel worker --loglevel INFO --concurrency 2 &
pids+=($!)
scripts/supervise.sh $BIN/celery -A flywheel beat --loglevel INFO &
pids+=($!)
$BIN/uvicorn flywheel.asgi:application --host "$HOST" --port "$PORT" --lifespan on &
pids+=($!)

echo "Flywheel is starting on http://$HOST:$PORT/ (health: /healthz, readiness: /readyz). Ctrl-C stops it." >&2
# If the web server exits, stop the others (the worker and beat are restarted instead).
wait -n "${pids[@]}"
