"""First-run set-up: an admin user and an API key, when none exist yet."""

from __future__ import annotations

import secrets
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser

from flywheel.models import ApiKey
from flywheel.services import api_key_create, tenant_get_or_create_default


class Command(BaseCommand):
    help = "Create an admin user and an API key if there are none, and say how to log in."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--username", default="admin")
        parser.add_argument("--url", default="http://127.0.0.1:8000", help="Where Flywheel runs.")

    def handle(self, *args: Any, **options: Any) -> None:
        user_model = get_user_model()
        url = options["url"].rstrip("/")
        if not user_model.objects.filter(is_superuser=True).exists():
            password = secrets.token_urlsafe(12)
            user_model.objects.create_superuser(options["username"], "", password)
            self.stdout.write(
                f"Admin: {url}/admin/  user {options['username']!r}  password {password!r}\n"
                "  (shown once; change it with: .venv/bin/python manage.py changepassword "
                f"{options['username']})"
            )
        else:
            self.stdout.write(f"Admin: {url}/admin/ (log in with your existing admin user)")
        if not ApiKey.objects.active().exists():
            _, raw_key = api_key_create(tenant=tenant_get_or_create_default(), name="first key")
            self.stdout.write(
                f"API key (shown once): {raw_key}\n"
                f"  try: curl -H 'Authorization: Bearer {raw_key}' {url}/api/v1/whoami"
            )
