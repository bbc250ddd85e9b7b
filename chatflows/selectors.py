"""Reads of discovered flows, scoped by tenant."""

from __future__ import annotations

import re

from django.db.models import Q

from chatflows.models import Flow
from flywheel.errors import ValidationError
from flywheel.jsonin import string_problem
from flywheel.models import Tenant

INTENT_SLUG = re.compile(
    r"[-a-z0-9_]{1,50}"
)  # as a query's intent (routing/answering/query_input.py)
MAX_BACKEND_NAME = 100
# ASCII digits only ("²".isdigit() is true), and few enough to fit a bigint.
_BACKEND_ID = re.compile(r"[0-9]{1,18}")


def _refuse(name: str, rule: str) -> ValidationError:
    return ValidationError(f"The {name} filter is not valid.", details={"fields": {name: rule}})


def _check_filters(backend: str | None, intent: str | None) -> None:
    """Refuse filter values no flow can match: the database would fail on some (NUL)."""
    if backend and (len(backend) > MAX_BACKEND_NAME or string_problem(backend)):
        raise _refuse("backend", "Must be a backend's id or name (up to 100 characters).")
    if intent and not INTENT_SLUG.fullmatch(intent):
        raise _refuse("intent", "Must be an intent slug such as 'code-review'.")


def flows_visible_to(
    tenant: Tenant, *, backend: str | None = None, intent: str | None = None
) -> list[Flow]:
    """Active flows on shared and the tenant's own backends.

    ``backend`` is an id or a name; ``intent`` keeps flows whose keywords name
    it, plus generic flows (they serve any intent). A value that matches
    nothing is an empty list. Raises ValidationError naming ``backend`` or
    ``intent`` when its value is one no flow could match.
    """
    _check_filters(backend, intent)
    flows = (
        Flow.objects.active()
        .filter(Q(backend__tenant__isnull=True) | Q(backend__tenant=tenant))
        .select_related("backend")
        .order_by("backend__name", "name")
    )
    if backend:
        by_name = Q(backend__name__iexact=backend)
        flows = flows.filter(
            by_name | Q(backend_id=int(backend)) if _BACKEND_ID.fullmatch(backend) else by_name
        )
    result = list(flows)
    if intent:
        # Filtered here, not in SQL: JSON containment is not portable to SQLite.
        result = [f for f in result if f.is_generic or intent in f.intent_keywords]
    return result
