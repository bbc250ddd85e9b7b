"""A decision's timings, score and confidences, and a performance record's latency, in
4 bytes each (flywheel.fields.RealField), not 8. On PostgreSQL the ALTER rewrites both
tables, holding them the while: on a large database, run it when few questions come."""

import flywheel.fields
from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('routing', '0025_decision_json_compact'),
    ]

    operations = [
        migrations.AlterField(
            model_name='performancerecord',
            name='latency_ms',
            field=flywheel.fields.RealField(),
        ),
        migrations.AlterField(
            model_name='routingdecision',
            name='classify_ms',
            field=flywheel.fields.RealField(default=0),
        ),
        migrations.AlterField(
            model_name='routingdecision',
            name='execute_ms',
            field=flywheel.fields.RealField(default=0),
        ),
        migrations.AlterField(
            model_name='routingdecision',
            name='intent_confidence',
            field=flywheel.fields.RealField(blank=True, null=True),
        ),
        migrations.AlterField(
            model_name='routingdecision',
            name='query_type_confidence',
            field=flywheel.fields.RealField(blank=True, null=True),
        ),
        migrations.AlterField(
            model_name='routingdecision',
            name='route_ms',
            field=flywheel.fields.RealField(default=0),
        ),
        migrations.AlterField(
            model_name='routingdecision',
            name='score',
            field=flywheel.fields.RealField(blank=True, null=True),
        ),
        migrations.AlterField(
            model_name='routingdecision',
            name='total_ms',
            field=flywheel.fields.RealField(default=0),
        ),
    ]
