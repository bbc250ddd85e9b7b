#!/usr/bin/env bash
# Stop the Flowise and/or Langflow servers started by start.sh: SIGTERM to the
# process group recorded in var/peers/<name>.pid, wait up to
# PEERS_STOP_TIMEOUT (35 s; Flowise force-exits after 30 s), then SIGKILL,
# and remove the pid file. Only that process group is ever signalled.
#
#   scripts/peers/stop.sh [all|flowise|langflow]
set -euo pipefail
cd "$(dirname "$0")/../.."

RUN_DIR=$PWD/var/peers
TIMEOUT=${PEERS_STOP_TIMEOUT:-35}

log() { echo "[peers] $*" >&2; }

# True while any process is left in process group $1.
group_alive() { pgrep -g "$1" > /dev/null 2>&1; }

stop_one() {
    local name=$1 pidfile="$RUN_DIR/$1.pid" pid waited=0
    if [ ! -f "$pidfile" ]; then
        log "$name: not running (no $pidfile)"
        return 0
    fi
    pid=$(cat "$pidfile")
    if ! [[ $pid =~ ^[0-9]+$ ]] || [ "$pid" -le 1 ]; then
        log "$name: ignoring bad pid file $pidfile"
        rm -f "$pidfile"
        return 0
    fi
    if ! group_alive "$pid"; then
        log "$name: not running (stale pid $pid)"
        rm -f "$pidfile"
        return 0
    fi
    log "stopping $name (process group $pid)"
    kill -TERM -- "-$pid" 2>/dev/null || true
    while group_alive "$pid"; do
        if (( waited >= TIMEOUT * 2 )); then
            log "$name did not exit after ${TIMEOUT}s; sending SIGKILL"
            kill -KILL -- "-$pid" 2>/dev/null || true
            sleep 1
            break
        fi
        sleep 0.5
        waited=$((waited + 1))
    done
    rm -f "$pidfile"
    log "$name stopped after $((waited / 2)).$((waited % 2 * 5))s"
}

case "${1:-all}" in
    flowise) stop_one flowise ;;
    langflow) stop_one langflow ;;
    all) stop_one flowise; stop_one langflow ;;
    *) echo "usage: $0 [all|flowise|langflow]" >&2; exit 2 ;;
esac
