#!/usr/bin/env bash
# Run a command, and run it again whenever it exits, until this script is told to
# stop (TERM or INT), which it passes on to the command. `make run` keeps its Celery
# worker and beat alive with it: one crash (a broker hiccup) must not stop Flywheel.
# RESTART_DELAY (seconds, default 2) spaces the restarts out; STOP_GRACE (seconds,
# default 10) is how long the command has to stop before it is killed. With
# SUPERVISE_LOG set, the command's output is appended to that file; this script's
# own lines (a restart) still go to standard error.
set -uo pipefail

delay=${RESTART_DELAY:-2}
grace=${STOP_GRACE:-10}  # seconds the command has to stop before it is killed
child=""
stop() {
    if [ -n "$child" ] && kill -TERM "$child" 2>/dev/null; then
        # A Celery worker whose pool processes got the same signal can hang in its
        # warm shutdown (seen here): give it the grace, then kill it.
        for _ in $(seq $((grace * 10))); do
            kill -0 "$child" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$child" 2>/dev/null
        wait "$child" 2>/dev/null
    fi
    exit 0
}
trap stop TERM INT

while true; do
    if [ -n "${SUPERVISE_LOG:-}" ]; then
        "$@" >>"$SUPERVISE_LOG" 2>&1 &
    else
        "$@" &
    fi
    child=$!
    wait "$child"
    status=$?
    echo "[flywheel] $(basename "$1") ${2:-} ${3:-} ${4:-} exited (status $status)${SUPERVISE_LOG:+, see $SUPERVISE_LOG}; restarting in ${delay} s" >&2
    sleep "$delay" &
    wait $!
done
