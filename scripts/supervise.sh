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
stop() {
    # Every job of this script, not only $child: a signal that comes between the
    # command's start and `child=$!` would otherwise leave the command running.
    local jobs
    jobs=$(jobs -p)
    if [ -n "$jobs" ]; then
        kill -TERM $jobs 2>/dev/null
        # A Celery worker whose pool processes got the same signal can hang in its
        # warm shutdown (seen here): give it the grace, then kill it.
        for _ in $(seq $((grace * 10))); do
            alive=""
            for pid in $jobs; do kill -0 "$pid" 2>/dev/null && alive=1; done
            [ -z "$alive" ] && break
            sleep 0.1
        done
        kill -KILL $jobs 2>/dev/null
        wait 2>/dev/null
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
