"""Imports run one way: flywheel ← backends ← chatflows ← routing ← analytics.

Routing owns the decisions it writes; analytics only reads them, so routing
imports nothing from analytics. The composition roots (flywheel/urls.py,
flywheel/asgi.py), agents/ (the MCP door) and dialects/ (the OpenAI-compatible
door) stand on the apps below them; no app imports either door.

Inside routing, the rooms stand on each other the same way: models (and the leaf
modules patterns and errors) ← classification ← selection ← recording ← answering,
and the doors (api, chat, admin, tasks, signals, management, install) on top; no
room imports a door.

Every module of an app is parsed, lazy imports inside functions included, so a
shortcut upwards fails here instead of going unnoticed. The same parse holds the
one HTTP layer: no module outside backends/http/ imports an HTTP library
(scripts, benchmarks and tests may). What a lower layer
needs from a higher one it is handed through a hook the higher one registers
at start-up: the health policy (backends/policy.py) and keyword derivation
(chatflows/keywords.py); those hooks are tested below too.
"""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.db.migrations.loader import MigrationLoader

from backends import policy
from backends.adapters.base import HealthResult
from backends.models import Backend
from backends.policy import HealthPolicy, health_policy
from backends.services import health_record
from chatflows import keywords
from routing.install import defaults_load
from routing.models import RoutingPolicy
from tests.paths import ROOT

# Each app and the apps it must never import.
ABOVE = {
    "backends": {"chatflows", "routing", "analytics", "agents", "dialects"},
    "chatflows": {"routing", "analytics", "agents", "dialects"},
    "routing": {"analytics", "agents", "dialects"},
    "analytics": {"agents", "dialects"},
    "agents": {"dialects"},
    "dialects": {"agents", "analytics"},
}
# routing's rooms, lowest first: each imports nothing from the rooms after it, and none
# imports routing's doors (the modules at routing's top level that are not rooms).
ROOMS = [
    "routing.patterns",
    "routing.errors",
    "routing.models",
    "routing.classification",
    "routing.selection",
    "routing.recording",
    "routing.answering",
]
DOORS = {
    "routing.api",
    "routing.chat",
    "routing.admin",
    "routing.tasks",
    "routing.signals",
    "routing.apps",
    "routing.management",
    "routing.install",
}
# Calls that import by name at run time: import_module("x"), __import__("x").
IMPORT_CALLS = {"import_module", "__import__"}
# HTTP client libraries: only the one HTTP layer may use them.
HTTP_LIBRARIES = {
    "aiohttp",
    "http.client",
    "httpcore",
    "httptools",
    "httpx",
    "httpx2",
    "requests",
    "urllib.request",
    "urllib3",
}
HTTP_LAYER = "backends.http"
# What may call out on its own: tooling, not the product.
HTTP_EXEMPT = {"scripts", "bench", "tests"}


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _resolve(module: str, node: ast.ImportFrom, *, package: str) -> str:
    """The absolute module of ``from <dots><module> import ...`` inside ``package``."""
    if not node.level:
        return module
    base = package.split(".")[: len(package.split(".")) - node.level + 1]
    return ".".join([*base, module] if module else base)


def imported_modules(source: str, *, package: str) -> Iterator[tuple[int, str]]:
    """(line, module) for every import in ``source``, wherever it is written
    (module level, inside functions and classes, under TYPE_CHECKING), and every
    import_module / __import__ call with a literal name."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            yield node.lineno, _resolve(node.module or "", node, package=package)
        elif isinstance(node, ast.Call) and node.args:
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            first = node.args[0]
            if name in IMPORT_CALLS and isinstance(first, ast.Constant):
                yield node.lineno, str(first.value)


def _app_files(app: str) -> list[Path]:
    """The modules of an app or of one room (a dotted package or module), migrations aside."""
    base = ROOT.joinpath(*app.split("."))
    if base.with_suffix(".py").is_file():
        return [base.with_suffix(".py")]
    return sorted(p for p in base.rglob("*.py") if "migrations" not in p.parts)


def _within(module: str, prefixes: set[str]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def _imports_of(place: str, forbidden: set[str]) -> list[str]:
    """Where the modules of ``place`` import a module under one of ``forbidden``."""
    found = []
    for path in _app_files(place):
        module = _module_name(path)
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for line, imported in imported_modules(path.read_text(), package=package):
            if _within(imported, forbidden):
                found.append(f"{path.relative_to(ROOT)}:{line} imports {imported}")
    return found


def _upward_imports(app: str) -> list[str]:
    return _imports_of(app, ABOVE[app])


@pytest.mark.parametrize("app", sorted(ABOVE))
def test_an_app_imports_nothing_from_the_layers_above_it(app: str) -> None:
    assert _app_files(app), f"no modules found for {app}"
    assert _upward_imports(app) == []


@pytest.mark.parametrize("room", ROOMS)
def test_a_routing_room_imports_nothing_from_the_rooms_above_it_nor_a_door(room: str) -> None:
    above = set(ROOMS[ROOMS.index(room) + 1 :])
    assert _app_files(room), f"no modules found for {room}"
    assert _imports_of(room, above | DOORS) == []


@pytest.mark.parametrize("app", [*sorted(ABOVE), "flywheel", "agents"])
def test_no_module_of_an_app_is_over_400_lines(app: str) -> None:
    # A module that outgrows this is split by what its parts do (a routing room's too).
    long = [
        f"{path.relative_to(ROOT)}: {lines} lines"
        for path in _app_files(app)
        if (lines := len(path.read_text().splitlines())) > 400
    ]
    assert long == []


def test_every_routing_module_is_in_a_room_or_a_door() -> None:
    placed = set(ROOMS) | DOORS | {"routing"}
    unplaced = [
        _module_name(path)
        for path in _app_files("routing")
        if not _within(_module_name(path), placed) and _module_name(path) != "routing"
    ]
    assert unplaced == []


@pytest.mark.parametrize("app", sorted(a for a in ABOVE if (ROOT / a / "migrations").is_dir()))
def test_an_apps_migrations_depend_on_none_of_the_layers_above_it(app: str) -> None:
    # Migrations are left out of the import scan; their dependencies follow the layers
    # too (routing took the decision models over without depending on analytics).
    loader = MigrationLoader(None)
    upward = [
        (name, dependency)
        for (label, name), migration in loader.disk_migrations.items()
        if label == app
        for dependency in migration.dependencies
        if dependency[0] in ABOVE[app]
    ]

    assert [name for label, name in loader.disk_migrations if label == app]
    assert upward == []


def test_the_check_sees_lazy_relative_and_dynamic_imports() -> None:
    source = """
import routing.classification.rules
from routing import state
from . import snapshot
from ..analytics import models

def later():
    from chatflows.services import adiscover_all
    import_module("routing.install")
    importlib.import_module("analytics.models")

class Admin:
    def action(self):
        import chatflows.models as m
"""
    found = sorted(name for _, name in imported_modules(source, package="backends.management"))

    assert found == sorted(
        [
            "routing.classification.rules",
            "routing",
            "backends.management",  # relative imports stay inside their own app
            "backends.analytics",
            "chatflows.services",
            "routing.install",
            "analytics.models",
            "chatflows.models",
        ]
    )


# --- one HTTP layer --------------------------------------------------------------------


def _product_files() -> list[Path]:
    """Every module of the project but tooling (scripts, bench, tests), migrations included."""
    return sorted(
        path
        for path in ROOT.rglob("*.py")
        if path.relative_to(ROOT).parts[0] not in HTTP_EXEMPT
        and not any(part.startswith(".") or part == "var" for part in path.relative_to(ROOT).parts)
    )


def http_imports(source: str, *, package: str) -> list[tuple[int, str]]:
    """(line, module) for every HTTP library ``source`` imports, in every spelling
    imported_modules sees; ``from http import client`` counts as http.client."""
    found = set(imported_modules(source, package=package))
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.update((node.lineno, f"{node.module}.{alias.name}") for alias in node.names)
    libraries = {(line, name) for line, name in found if _within(name, HTTP_LIBRARIES)}
    return sorted(  # one finding per library and line: "from aiohttp import web" is aiohttp
        (line, name)
        for line, name in libraries
        if not any(other == (line, name.rpartition(".")[0]) for other in libraries)
    )


def http_library_imports(paths: list[Path]) -> list[str]:
    """Where modules outside the one HTTP layer import an HTTP library."""
    found = []
    for path in paths:
        module = _module_name(path)
        if _within(module, {HTTP_LAYER}):
            continue
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for line, imported in http_imports(path.read_text(), package=package):
            found.append(f"{path.relative_to(ROOT)}:{line} imports {imported}")
    return found


def test_only_the_http_layer_imports_an_http_library() -> None:
    paths = _product_files()
    scanned = {_module_name(path).split(".")[0] for path in paths}

    assert {"flywheel", "backends", "chatflows", "routing", "analytics", "agents"} <= scanned
    assert any(_within(_module_name(path), {HTTP_LAYER}) for path in paths)
    assert http_library_imports(paths) == []


def test_the_http_check_sees_every_spelling() -> None:
    source = """
import httpx
from aiohttp import web
import urllib3.util
from http import client
from http import HTTPStatus
from urllib.parse import urlsplit

def later():
    import requests
    importlib.import_module("httptools")
"""
    found = [name for _, name in http_imports(source, package="routing")]

    assert found == ["httpx", "aiohttp", "urllib3.util", "http.client", "requests", "httptools"]


# --- the hooks that replace the upward imports ----------------------------------------


@pytest.fixture
def restore_hooks() -> Iterator[None]:
    source, deriver = policy._source, keywords._deriver
    yield
    policy.use_health_policy(source)
    keywords.use_keyword_deriver(deriver)


@pytest.mark.django_db
def test_backends_read_the_routing_policy_through_the_hook(backend: Backend) -> None:
    RoutingPolicy.objects.create(
        cooldown_failures=1,
        cooldown_seconds=5,
        health_cache_ttl_seconds=7,
        flow_cache_ttl_seconds=11,
    )

    assert health_policy() == HealthPolicy(
        cooldown_failures=1,
        cooldown_seconds=5,
        health_cache_ttl_seconds=7,
        flow_cache_ttl_seconds=11,
    )
    outcome = health_record(backend=backend, result=HealthResult(ok=False, latency_ms=1.0))
    assert outcome.in_cooldown  # after one failure, as this policy says


def test_without_a_source_the_health_policy_is_the_routing_policy_defaults(
    restore_hooks: None,
) -> None:
    policy.use_health_policy(HealthPolicy)

    unsaved = RoutingPolicy()  # its fields' defaults
    defaults = {
        field.name: getattr(unsaved, field.name) for field in dataclasses.fields(HealthPolicy)
    }
    assert health_policy() == HealthPolicy(**defaults)


@pytest.mark.django_db
def test_flow_keywords_come_from_the_intent_rules_routing_registers() -> None:
    defaults_load()

    assert "code-review" in keywords.flow_keywords(name="Code review bot")


def test_without_a_deriver_a_flow_gets_no_keywords(restore_hooks: None) -> None:
    keywords.use_keyword_deriver(keywords._no_keywords)

    assert keywords.flow_keywords(name="Code review bot", endpoint_name="code_review") == []
