# Flywheel: `make run` serves it on an embedded default; `make test` runs the suite.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: help run test test-live fuzz soak chaos eval sim sim-http lint docs format lock clean bench load

help:
	@echo "make run    install, migrate, load defaults and serve web + worker + beat on $(HOST):$(PORT)"
	@echo "make test   run the test suite on PostgreSQL and Redis (starts them if stopped)"
	@echo "make test-live  run the tests marked live against the servers of make peers"
	@echo "make fuzz   schemathesis over the served API schema, against a real server (~3 minutes)"
	@echo "make soak   make run's zero-setup default under light traffic for 15 minutes (SOAK_SECONDS)"
	@echo "make eval   classification accuracy per labelled set: rules, learned model, cascade"
	@echo "make sim    the learning simulator: how often the first backend tried is the best, and how fast a change is followed (ARGS=--held-out: the scenarios never tuned on)"
	@echo "make sim-http  the learning scenarios through a real Flywheel over HTTP, in real time (~10 minutes for the held-out ones; ARGS=--scenario NAME, --time-scale 0.5, --classify, --seeds N)"
	@echo "make chaos  the fault suite: failing backends, Redis and PostgreSQL stopped, web killed (~5 minutes)"
	@echo "make lint   ruff (lint + format check) and mypy"
	@echo "make docs   build docs/ into var/docs with MkDocs (strict) and check the README's links; fails on any warning"
	@echo "make format apply ruff's fixes and formatting"
	@echo "make lock   re-pin requirements/*.txt from requirements/*.in"
	@echo "make load   60 s of sustained load through uvicorn (a worker per core) against an instant stand-in: q/s, p50/p99, CPU per question, memory growth, a 500-question burst (LOAD_SECONDS; BEFORE=DIR: another checkout beside it)"
	@echo "make bench  routing decision, learning, rate-limit check, decision spool, REST overhead, concurrency, HTTP transports, MCP, analytics, storage and retention benchmarks (prints figures)"
	@echo "make peers  install, start and seed real Flowise + Langflow on loopback; register them as backends"
	@echo "make peers-stop  stop the servers started by make peers"

$(PY):
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' \
		|| { echo "error: Flywheel needs Python 3.11 (found: $$($(PYTHON) --version 2>&1)); set PYTHON=/path/to/python3.11"; exit 1; }
	@echo "Creating $(VENV) with $$($(PYTHON) --version)."
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

# pip's "Collecting ..." lines show what is being installed (the first time only).
PIP_SHOW := grep --line-buffered -E '^(Collecting|Successfully installed)' || true

$(VENV)/.base-installed: requirements/base.txt | $(PY)
	@echo "Installing Flywheel's Python packages into $(VENV): about 80 packages, 1-3 minutes the first time."
	@set -o pipefail; $(PY) -m pip install --progress-bar off -r requirements/base.txt | { $(PIP_SHOW); }
	@touch $@

$(VENV)/.dev-installed: requirements/dev.txt requirements/base.txt | $(PY)
	@echo "Installing Flywheel's and its tools' Python packages into $(VENV): 2-4 minutes the first time."
	@set -o pipefail; $(PY) -m pip install --progress-bar off -r requirements/dev.txt | { $(PIP_SHOW); }
	@touch $@ $(VENV)/.base-installed

run: $(VENV)/.base-installed
	HOST=$(HOST) PORT=$(PORT) scripts/run.sh

test: $(VENV)/.dev-installed
	scripts/test.sh -m "not live" $(ARGS)

# Tests against the real servers of `make peers`; FLYWHEEL_LIVE=1 makes an unreachable one fail.
# One process: the live servers are shared, and their tests few.
test-live: $(VENV)/.dev-installed
	TEST_WORKERS=0 scripts/test.sh -m live $(ARGS)

# Schemathesis against a served Flywheel with its own database and cache prefix;
# ARGS go to schemathesis (scripts/fuzz.py says what it sets up and its bounds).
fuzz: $(VENV)/.dev-installed
	$(PY) scripts/fuzz.py $(ARGS)

# scripts/soak.py says what it checks; SOAK_SECONDS shortens or lengthens it.
soak: $(VENV)/.dev-installed
	$(PY) scripts/soak.py

# Accuracy and confusion matrices on tests/data (ARGS: set files, --misses, --no-matrix).
eval: $(VENV)/.dev-installed
	$(PY) scripts/intent_eval.py $(ARGS)

sim: $(VENV)/.dev-installed
	$(PY) bench/learning.py $(ARGS)

# bench/learning_http.py says what it runs; it needs PostgreSQL and Redis, as make load does.
sim-http: $(VENV)/.dev-installed
	$(PY) scripts/ensure_services.py
	$(PY) bench/learning_http.py $(ARGS)

# scripts/chaos.py says what it checks; it runs its own PostgreSQL and Redis on loopback.
chaos: $(VENV)/.dev-installed
	$(PY) scripts/chaos.py $(ARGS)

lint: $(VENV)/.dev-installed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy .

# mkdocs.yml: strict, so a broken link or anchor between pages fails the build;
# scripts/check_links.py checks the README's links, which MkDocs does not read.
# No --quiet or -v: with MkDocs 1.6.1 either lets a strict build pass its warnings
# (mkdocs/mkdocs#4126, #3991).
docs: $(VENV)/.dev-installed
	$(VENV)/bin/mkdocs build --strict
	$(PY) scripts/check_links.py

format: $(VENV)/.dev-installed
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

bench: $(VENV)/.dev-installed
	$(PY) scripts/ensure_services.py
	$(PY) bench/routing_decision.py
	$(PY) bench/learning.py --seeds 3 --brief
	$(PY) bench/learning.py --held-out --seeds 3 --brief
	$(PY) bench/ratelimit.py
	$(PY) bench/spool.py
	$(PY) bench/rest.py
	$(PY) bench/http_transports.py
	$(PY) bench/load.py --rounds 3 --round-seconds 10
	$(PY) bench/mcp.py
	$(PY) bench/analytics.py
	$(PY) bench/storage.py
	$(PY) bench/retention.py

LOAD_SECONDS ?= 60

# bench/load.py says what it measures; it fails on any failed request or a decision lost.
# BEFORE=DIR measures another checkout (a git worktree of an earlier commit) in the same run.
load: $(VENV)/.dev-installed
	$(PY) scripts/ensure_services.py
	$(PY) bench/load.py --seconds $(LOAD_SECONDS) $(if $(BEFORE),--before $(BEFORE))

# Re-pin: resolve the top-level requirements in a scratch venv and freeze them.
lock:
	rm -rf var/lock-venv && $(PYTHON) -m venv var/lock-venv
	var/lock-venv/bin/pip install --quiet --upgrade pip
	var/lock-venv/bin/pip install --quiet -r requirements/base.in
	{ echo "# Pinned runtime dependencies: generated from base.in by 'make lock'."; \
	  var/lock-venv/bin/pip freeze --exclude pip; } > requirements/base.txt
	var/lock-venv/bin/pip freeze --exclude pip | sort > var/lock-base.txt
	var/lock-venv/bin/pip install --quiet -r requirements/dev.in
	{ echo "# Pinned development dependencies: generated from dev.in by 'make lock'."; \
	  echo "-r base.txt"; \
	  var/lock-venv/bin/pip freeze --exclude pip | sort | comm -13 var/lock-base.txt -; } > requirements/dev.txt
	rm -rf var/lock-venv var/lock-base.txt

# Live peers: real Flowise 3.1.4 (port 3100) and Langflow 1.13.0 (port 7860)
# installed into ~/.cache/flywheel/peers; credentials land in var/peers.env.
.PHONY: peers peers-stop

peers: $(VENV)/.dev-installed
	scripts/peers/install.sh && scripts/peers/start.sh && $(PY) scripts/peers/seed.py && scripts/peers/register.sh

peers-stop:
	scripts/peers/stop.sh

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
