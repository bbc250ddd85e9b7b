"""Each pytest-xdist worker keeps its cache keys and files apart from the others'.

scripts/test.sh loads this module with ``-p`` so that it runs before Django reads its
settings: a worker's cache prefix and var directory get its id (``gw0``, ``gw1``, ...)
as pytest-django gives its test database. What a test starts (a server, a command)
inherits the worker's values through the environment.
"""

from __future__ import annotations

import os
from pathlib import Path

WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")

if WORKER:
    prefix = os.environ.get("FLYWHEEL_CACHE_PREFIX", "flywheel")
    os.environ["FLYWHEEL_CACHE_PREFIX"] = f"{prefix}_{WORKER}"
    var = Path(os.environ.get("FLYWHEEL_VAR_DIR", "var"))
    os.environ["FLYWHEEL_VAR_DIR"] = str(var / WORKER)
