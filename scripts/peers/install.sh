#!/usr/bin/env bash
# Install the real Flowise and Langflow servers used by the live tests, once,
# into a cache outside the clone (they weigh ~2.7 GB and ~1.3 GB).
# Idempotent: a finished install leaves a marker and is not repeated.
set -euo pipefail

PEERS_DIR=${FLYWHEEL_PEERS_DIR:-$HOME/.cache/flywheel/peers}
FLOWISE_VERSION=3.1.4
LANGFLOW_VERSION=1.13.0
PYTHON=${PYTHON:-$(command -v python3.11 || command -v python3)}

mkdir -p "$PEERS_DIR"
log() { echo "[peers] $*" >&2; }

install_flowise() {
    local dir="$PEERS_DIR/flowise"
    local marker="$dir/.installed-$FLOWISE_VERSION"
    [ -f "$marker" ] && { log "Flowise $FLOWISE_VERSION already installed"; return; }
    command -v npm >/dev/null || { echo "error: npm (Node.js 20+) is needed to install Flowise" >&2; exit 1; }
    mkdir -p "$dir"
    log "installing Flowise $FLOWISE_VERSION into $dir (about 8 minutes)"
    # Skip every download of a browser or binary: this machine reaches only package registries.
    export PUPPETEER_SKIP_DOWNLOAD=1 PUPPETEER_SKIP_CHROMIUM_DOWNLOAD=1 PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 \
           CYPRESS_INSTALL_BINARY=0 ELECTRON_SKIP_BINARY_DOWNLOAD=1 HUSKY=0
    (
        cd "$dir"
        echo '{"name":"flywheel-flowise-peer","private":true}' > package.json
        # Install scripts are skipped (they fetch browsers and native binaries);
        # only sqlite3 is needed to serve the API, and it is built from source.
        npm install "flowise@$FLOWISE_VERSION" --ignore-scripts --no-audit --no-fund \
            --legacy-peer-deps --cache "$dir/.npm-cache" > install.log 2>&1
        npm rebuild sqlite3 --cache "$dir/.npm-cache" > rebuild-sqlite3.log 2>&1
    )
    touch "$marker"
    log "Flowise installed"
}

install_langflow() {
    local dir="$PEERS_DIR/langflow"
    local marker="$dir/.installed-$LANGFLOW_VERSION-openai"  # with the OpenAI component's client
    [ -f "$marker" ] && { log "Langflow $LANGFLOW_VERSION already installed"; return; }
    mkdir -p "$dir"
    log "installing langflow-base $LANGFLOW_VERSION into $dir with uv (about 1 minute)"
    (
        cd "$dir"
        # uv resolves langflow-base ~8x faster than pip; it lives in its own small venv.
        [ -x uv-venv/bin/uv ] || { "$PYTHON" -m venv uv-venv && uv-venv/bin/pip install --quiet uv; }
        export UV_CACHE_DIR="$dir/.uv-cache"
        rm -rf venv
        uv-venv/bin/uv venv --quiet venv --python "$PYTHON"
        # langchain-openai: the OpenAI component the fake-LLM flows use (fake_openai.py);
        # langchain-core held at what langflow-base resolves alone.
        uv-venv/bin/uv pip install --quiet --python venv/bin/python "langflow-base==$LANGFLOW_VERSION" \
            "langchain-openai==1.7.3" "langchain-core==1.7.2" > install.log 2>&1
    )
    touch "$marker"
    log "Langflow installed"
}

case "${1:-all}" in
    flowise) install_flowise ;;
    langflow) install_langflow ;;
    all) install_langflow; install_flowise ;;
    *) echo "usage: $0 [all|flowise|langflow]" >&2; exit 2 ;;
esac
