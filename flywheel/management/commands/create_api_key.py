"""Create an API key for a tenant and print it (the only time it is shown)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from flywheel.errors import ValidationError
from flywheel.models import Tenant
from flywheel.services import DEFAULT_TENANT_SLUG, api_key_create, tenant_get_or_create_default


class Command(BaseCommand):
    help = "Create an API key and print it once."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--name", required=True, help="What the key is for.")
        parser.add_argument(
            "--tenant", default=DEFAULT_TENANT_SLUG, help="Tenant slug (default: %(default)s)."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        slug = options["tenant"]
        found = (
            tenant_get_or_create_default()
            if slug == DEFAULT_TENANT_SLUG
            else Tenant.objects.filter(slug=slug).first()
        )
        if found is None:
            raise CommandError(f"No tenant with slug {slug!r}.")
        tenant = found
        try:
            api_key, raw_key = api_key_create(tenant=tenant, name=options["name"])
        except ValidationError as err:
            raise CommandError(err.message) from err
        self.stderr.write(f"Created key {api_key.prefix} for tenant {tenant.slug}; copy it now:")
        self.stdout.write(raw_key)
