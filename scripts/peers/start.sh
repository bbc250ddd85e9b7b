#!/usr/bin/env bash
# Start the real Flowise and/or Langflow servers installed by install.sh, on
# loopback, each in its own process group, and wait until each answers its
# health check. PIDs go to var/peers/<name>.pid, output to var/peers/<name>.log,
# data to $FLYWHEEL_PEERS_DIR/<name>/data (default ~/.cache/flywheel/peers).
# A server already running from our pid file is left alone.
#
#   scripts/peers/start.sh [all|flowise|langflow]
#
# Env: FLOWISE_PORT (3100), LANGFLOW_PORT (7860), PEERS_START_TIMEOUT (180 s),
#      LANGFLOW_SUPERUSER / LANGFLOW_SUPERUSER_PASSWORD (admin / admin-pass-123).
set -euo pipefail
cd "$(dirname "$0")/../.."

PEERS_DIR=${FLYWHEEL_PEERS_DIR:-$HOME/.cache/flywheel/peers}
RUN_DIR=$PWD/var/peers
FLOWISE_PORT=${FLOWISE_PORT:-3100}
LANGFLOW_PORT=${LANGFLOW_PORT:-7860}
TIMEOUT=${PEERS_START_TIMEOUT:-180}

log() { echo "[peers] $*" >&2; }
die() { echo "error: $*" >&2; exit 1; }

# The recorded PID, if that process is alive and is still the server we
# started (guards against a stale pid file whose PID was reused).
live_pid() {
    local name=$1 pidfile="$RUN_DIR/$1.pid" pid
    [ -f "$pidfile" ] || return 1
    pid=$(cat "$pidfile")
    [[ $pid =~ ^[0-9]+$ ]] || return 1
    kill -0 "$pid" 2>/dev/null || return 1
    tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -q "$name" || return 1
    echo "$pid"
}

now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

# Summed RSS (MB) of every process in the group led by $1.
group_rss_mb() {
    ps -o rss= -g "$1" 2>/dev/null | awk '{s += $1} END {printf "%d", s / 1024}'
}

# After a failed start: TERM the group, KILL whatever is left 5 s later.
stop_group() {
    kill -TERM -- "-$1" 2>/dev/null || true
    for _ in 1 2 3 4 5 6 7 8 9 10; do
        pgrep -g "$1" > /dev/null || return 0
        sleep 0.5
    done
    kill -KILL -- "-$1" 2>/dev/null || true
}

# Launch "$@" (after `cd $dir`, with the caller's exported env) detached, in
# a new session/process group, and wait until `$health_cmd` succeeds.
launch() {
    local name=$1 port=$2 health_cmd=$3 workdir=$4; shift 4
    local url="http://127.0.0.1:$port"
    local pidfile="$RUN_DIR/$name.pid" logfile="$RUN_DIR/$name.log" pid start elapsed

    if pid=$(live_pid "$name"); then
        log "$name already running (pid $pid) on $url"
        return 0
    fi
    rm -f "$pidfile"
    # Something else on the port would make the health check lie, and Flowise
    # does not even exit when it cannot bind (it logs EADDRINUSE and idles).
    if [ -n "$(ss -Hltn "sport = :$port" 2>/dev/null)" ]; then
        die "$name: port $port is already in use by a process not started by this script; stop it or set ${name^^}_PORT"
    fi

    mkdir -p "$RUN_DIR"
    log "starting $name on $url (log: ${logfile#"$PWD"/})"
    start=$(now_ms)
    # setsid: the server and its children get their own process group, so
    # stop.sh can signal exactly them. Without job control the background
    # subshell is not a group leader, so setsid execs in place: $! is the
    # server's PID and also its process group ID.
    (cd "$workdir" && exec setsid "$@" > "$logfile" 2>&1 < /dev/null) &
    pid=$!
    echo "$pid" > "$pidfile"

    while ! eval "$health_cmd"; do
        if ! kill -0 "$pid" 2>/dev/null || grep -q EADDRINUSE "$logfile"; then
            echo "error: $name failed during start-up; last lines of $logfile:" >&2
            tail -n 40 "$logfile" >&2
            stop_group "$pid"
            rm -f "$pidfile"
            exit 1
        fi
        if (( $(now_ms) - start > TIMEOUT * 1000 )); then
            echo "error: $name did not answer on $url within ${TIMEOUT}s; last lines of $logfile:" >&2
            tail -n 40 "$logfile" >&2
            stop_group "$pid"
            rm -f "$pidfile"
            exit 1
        fi
        sleep 0.5
    done
    elapsed=$(( $(now_ms) - start ))
    log "$name up on $url after $((elapsed / 1000)).$((elapsed % 1000 / 100))s (pid $pid, RSS $(group_rss_mb "$pid") MB)"
}

start_flowise() {
    local dir="$PEERS_DIR/flowise" data="$PEERS_DIR/flowise/data"
    [ -f "$dir/.installed-3.1.4" ] || die "Flowise is not installed in $dir; run scripts/peers/install.sh flowise"
    mkdir -p "$data/logs" "$data/storage" "$data/home"
    (
        # FLOWISE.md §2. HOST is env-only; HOME is where Flowise creates .flowise/.
        export HOST=127.0.0.1 PORT=$FLOWISE_PORT
        export DATABASE_TYPE=sqlite DATABASE_PATH=$data SECRETKEY_PATH=$data
        export LOG_PATH=$data/logs LOG_LEVEL=info
        export STORAGE_TYPE=local BLOB_STORAGE_PATH=$data/storage
        export DISABLE_FLOWISE_TELEMETRY=true HOME=$data/home
        launch flowise "$FLOWISE_PORT" \
            "[ \"\$(curl -s --max-time 2 http://127.0.0.1:$FLOWISE_PORT/api/v1/ping)\" = pong ]" \
            "$data" node "$dir/node_modules/flowise/bin/run" start
    )
}

start_langflow() {
    local dir="$PEERS_DIR/langflow" data="$PEERS_DIR/langflow/data"
    [ -x "$dir/venv/bin/langflow" ] || die "Langflow is not installed in $dir; run scripts/peers/install.sh langflow"
    mkdir -p "$data/tmp"
    (
        # LANGFLOW.md §2 (env.sh): everything under the data dir, nothing phoned home.
        export LANGFLOW_CONFIG_DIR=$data
        export LANGFLOW_DATABASE_URL=sqlite:///$data/langflow.db
        export LANGFLOW_KNOWLEDGE_BASES_DIR=$data/knowledge_bases
        export LANGFLOW_TELEMETRY_WRITER_OUTBOX_DIR=$data/telemetry_outbox
        export LANGFLOW_LOG_FILE=$data/langflow.log LANGFLOW_LOG_LEVEL=info
        export LANGFLOW_HOST=127.0.0.1 LANGFLOW_PORT=$LANGFLOW_PORT
        export LANGFLOW_BACKEND_ONLY=true LANGFLOW_OPEN_BROWSER=false
        export LANGFLOW_AUTO_LOGIN=false
        export LANGFLOW_SUPERUSER=${LANGFLOW_SUPERUSER:-admin}
        export LANGFLOW_SUPERUSER_PASSWORD=${LANGFLOW_SUPERUSER_PASSWORD:-admin-pass-123}
        export LANGFLOW_RATE_LIMIT_PER_MINUTE=60
        export TMPDIR=$data/tmp
        export DO_NOT_TRACK=true LANGFLOW_DO_NOT_TRACK=true
        export LANGFLOW_STORE=false LANGFLOW_MODELS_DEV_REFRESH=false
        export LANGFLOW_MCP_COMPOSER_ENABLED=false LANGFLOW_ADD_PROJECTS_TO_MCP_SERVERS=false
        export LANGFLOW_AGENTIC_EXPERIENCE=false
        # Flows with an LLM reach the fake OpenAI server (scripts/peers/fake_openai.py) on loopback.
        export LANGFLOW_SSRF_ALLOWED_HOSTS=127.0.0.1
        launch langflow "$LANGFLOW_PORT" \
            "curl -sf -o /dev/null --max-time 2 http://127.0.0.1:$LANGFLOW_PORT/health_check" \
            "$data" "$dir/venv/bin/langflow" run --host 127.0.0.1 --port "$LANGFLOW_PORT" --backend-only
    )
}

case "${1:-all}" in
    flowise) start_flowise ;;
    langflow) start_langflow ;;
    all) start_flowise; start_langflow ;;
    *) echo "usage: $0 [all|flowise|langflow]" >&2; exit 2 ;;
esac
