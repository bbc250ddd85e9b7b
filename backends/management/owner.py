"""Which backend a management command means: a name, and its owner (shared unless a
tenant is named), so that a command never reaches another owner's backend of that name."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser

from backends.models import Backend
from backends.selectors import backend_find
from flywheel.models import Tenant


def add_owner_arguments(parser: CommandParser) -> None:
    parser.add_argument(
        "--tenant",
        metavar="SLUG",
        help="The backend belongs to this tenant (default: a shared backend).",
    )


def owner(slug: str | None) -> Tenant | None:
    """The tenant of ``--tenant SLUG``, or None (shared). Raises CommandError for no such."""
    if slug is None:
        return None
    tenant = Tenant.objects.filter(slug=slug).first()
    if tenant is None:
        raise CommandError(f"No tenant with slug {slug!r}.")
    return tenant


def chosen_backends(options: dict[str, Any]) -> list[Backend]:
    """``--backend NAME [--tenant SLUG]``: that one backend; without --backend, every
    enabled backend. Raises CommandError when the named one does not exist."""
    if not options.get("backend"):
        return list(Backend.objects.filter(enabled=True))
    tenant = owner(options.get("tenant"))
    backend = backend_find(name=options["backend"], tenant=tenant)
    if backend is None:
        whose = f"of tenant {tenant.slug!r}" if tenant else "shared"
        raise CommandError(f"No {whose} backend named {options['backend']!r}.")
    return [backend]
