# Attempts recorded before backend errors were scrubbed may hold an echo of the key
# Flywheel sent, or other credentials a backend put in its error: scrub them once.

from django.db import migrations

from backends.http.redact import redact_value, secret_spellings

BATCH = 1000


def scrub(apps, schema_editor):
    Backend = apps.get_model("backends", "Backend")
    RoutingDecision = apps.get_model("analytics", "RoutingDecision")
    keys = [key for key in Backend.objects.values_list("api_key", flat=True) if key]
    secrets = secret_spellings([*keys, *(f"Bearer {key}" for key in keys)])
    changed = []
    # Every decision, the empty chains skipped here: compared in SQL, [] is jsonb, which
    # a later migration (routing 0025) makes the column no longer be.
    decisions = RoutingDecision.objects.only("id", "fallback_chain")
    for decision in decisions.iterator(chunk_size=BATCH):
        if not decision.fallback_chain:
            continue
        clean = [
            {**attempt, "error": redact_value(attempt.get("error", ""), secrets)}
            if isinstance(attempt, dict)
            else attempt
            for attempt in decision.fallback_chain
        ]
        if clean != decision.fallback_chain:
            decision.fallback_chain = clean
            changed.append(decision)
        if len(changed) >= BATCH:
            RoutingDecision.objects.bulk_update(changed, ["fallback_chain"])
            changed = []
    RoutingDecision.objects.bulk_update(changed, ["fallback_chain"])


class Migration(migrations.Migration):

    dependencies = [
        ("analytics", "0002_decision_evidence"),
        ("backends", "0003_scrub_stored_errors"),
    ]

    operations = [migrations.RunPython(scrub, migrations.RunPython.noop)]
