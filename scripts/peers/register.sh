#!/usr/bin/env bash
# Register the live peers (var/peers.env, written by seed.py) as Flywheel
# backends "flowise-peer" and "langflow-peer"; re-running updates them.
# They are shared backends (no --tenant): --update touches only the shared
# backend of that name, never a tenant's that happens to share it, and
# backends registered by a command are trusted to reach loopback.
# Uses the database Flywheel is configured for (var/ by default), migrating
# it first so this also works on a fresh clone.
set -euo pipefail
cd "$(dirname "$0")/../.."

[ -f var/peers.env ] || { echo "error: var/peers.env is missing; run scripts/peers/seed.py first" >&2; exit 1; }
# shellcheck source=/dev/null
source var/peers.env

PY=.venv/bin/python
$PY manage.py migrate --noinput -v 0
echo "[peers] registering flowise-peer ($FLOWISE_URL)" >&2
$PY manage.py add_backend --name flowise-peer --kind flowise --url "$FLOWISE_URL" --api-key "$FLOWISE_API_KEY" --update
echo "[peers] registering langflow-peer ($LANGFLOW_URL)" >&2
$PY manage.py add_backend --name langflow-peer --kind langflow --url "$LANGFLOW_URL" --api-key "$LANGFLOW_API_KEY" --update
