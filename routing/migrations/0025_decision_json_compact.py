"""A decision's candidates, fallback chain and evidence as compact json text, not jsonb
(flywheel.fields.CompactJSONField): the rows kept so far are rewritten by the ALTER, as
jsonb writes its text (with a space after each comma and colon)."""

import flywheel.fields
from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("routing", "0024_recent_indexes_ascending"),
    ]

    operations = [
        migrations.AlterField(
            model_name="routingdecision",
            name="candidates",
            field=flywheel.fields.CompactJSONField(
                blank=True, default=list, help_text="Each candidate with its factor scores."
            ),
        ),
        migrations.AlterField(
            model_name="routingdecision",
            name="evidence",
            field=flywheel.fields.CompactJSONField(
                blank=True,
                default=dict,
                help_text="Why: the intent's matched patterns (or context), the query type's reasoning and weights.",
            ),
        ),
        migrations.AlterField(
            model_name="routingdecision",
            name="fallback_chain",
            field=flywheel.fields.CompactJSONField(
                blank=True, default=list, help_text="Each attempt, in order, with its outcome."
            ),
        ),
    ]
