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
LOGS=${FLYWHEEL_VAR_DIR:-var}/log
# uvicorn would only say "address already in use" after everything else started.
if ! $BIN/python - "$HOST" "$PORT" <<'PY'
import socket, sys
with socket.socket(socket.AF_INET6 if ":" in sys.argv[1] else socket.AF_INET) as s:
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
    try:
        s.bind((sys.argv[1], int(sys.argv[2])))
    except OSError as err:
        sys.exit(f"Port {sys.argv[2]} on {sys.argv[1]} is not free ({err.strerror}): stop "
                 f"what uses it, or pick another port, e.g. PORT={int(sys.argv[2]) + 1} make run")
PY
then
    exit 1
fi

# /metrics sums what every process counted here (prometheus_client's multiprocess mode);
# the default directory starts empty, as that mode needs. Only once the port is known to
# be free: emptying it under a Flywheel already running would break that one's /metrics.
if [ -z "${PROMETHEUS_MULTIPROC_DIR:-}" ]; then
    export PROMETHEUS_MULTIPROC_DIR=${FLYWHEEL_VAR_DIR:-var}/metrics
    rm -rf "$PROMETHEUS_MULTIPROC_DIR"
fi

mkdir -p "$PROMETHEUS_MULTIPROC_DIR"
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
# Their start-up banners and lines go to log files; the console keeps the web's.
mkdir -p "$LOGS"
SUPERVISE_LOG="$LOGS/worker.log" scripts/supervise.sh \
    $BIN/celery -A flywheel worker --loglevel INFO --concurrency 2 &
pids+=($!)
SUPERVISE_LOG="$LOGS/beat.log" scripts/supervise.sh $BIN/celery -A flywheel beat --loglevel INFO &
pids+=($!)
echo "The Celery worker and beat log to $LOGS/worker.log and $LOGS/beat.log." >&2
# uvicorn, with the forwarded headers and read limits the settings give (flywheel/serving.py).
$BIN/python manage.py serve --host "$HOST" --port "$PORT" &
pids+=($!)

echo "Flywheel is starting on http://$HOST:$PORT/ (health: /healthz, readiness: /readyz). Ctrl-C stops it." >&2
# If the web server exits, stop the others (the worker and beat are restarted instead).
wait -n "${pids[@]}"
