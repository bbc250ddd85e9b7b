# Health errors written before replies were described rather than repeated may hold
# a backend's reply or an echo of the key Flywheel sent: scrub them once.

import re

from django.db import migrations

from backends.http.redact import redact, secret_spellings

BATCH = 1000
# "unexpected ping answer: <the reply>" was how a non-Flowise reply used to be shown.
_REPLY_ECHO = re.compile(r"^(unexpected ping answer|health check reports):.*", re.DOTALL)


def _scrubbed(text, secrets):
    return redact(_REPLY_ECHO.sub(r"\1 (the reply is not kept)", text), secrets)


def scrub(apps, schema_editor):
    Backend = apps.get_model("backends", "Backend")
    BackendHealth = apps.get_model("backends", "BackendHealth")
    HealthCheck = apps.get_model("backends", "HealthCheck")
    keys = [key for key in Backend.objects.values_list("api_key", flat=True) if key]
    secrets = secret_spellings([*keys, *(f"Bearer {key}" for key in keys)])
    for model, field in ((BackendHealth, "last_error"), (HealthCheck, "error")):
        changed = []
        for row in model.objects.exclude(**{field: ""}).iterator(chunk_size=BATCH):
            clean = _scrubbed(getattr(row, field), secrets)
            if clean != getattr(row, field):
                setattr(row, field, clean)
                changed.append(row)
            if len(changed) >= BATCH:
                model.objects.bulk_update(changed, [field])
                changed = []
        model.objects.bulk_update(changed, [field])


class Migration(migrations.Migration):

    dependencies = [
        ("backends", "0002_backend_owner_and_addresses"),
    ]

    operations = [migrations.RunPython(scrub, migrations.RunPython.noop)]
