"""The delivery log pages an endpoint's deliveries in time order (issue 30) through the
(endpoint, created_at, id) index, newest first, which includes the org (row-level
security's column) so that a page is read from the index alone. A plan made for any
endpoint reckoned an endpoint's deliveries at the average endpoint's few and went in by
another index that leads with the endpoint (its own one-column index, then the (endpoint,
event) unique one), sorting all of them. Now (endpoint, created_at, id) is the only index
that leads with the endpoint: the unique constraint leads with the event (and so serves
the event's lookups), and neither key keeps an index of its own. Each delivery written or
updated has two indexes fewer to keep. One transaction: no delivery is written
twice meanwhile."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("events", "0011_policy_stale_agents_event"),
        ("tenancy", "0016_audit_kind_legal_hold"),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name="delivery",
            name="events_delivery_once",
        ),
        migrations.AlterField(
            model_name="delivery",
            name="endpoint",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="deliveries",
                to="events.webhookendpoint",
            ),
        ),
        migrations.AlterField(
            model_name="delivery",
            name="event",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="deliveries",
                to="events.event",
            ),
        ),
        migrations.RemoveIndex(
            model_name="delivery",
            name="events_delivery_endpoint",
        ),
        migrations.AddIndex(
            model_name="delivery",
            index=models.Index(
                fields=["endpoint", "-created_at", "-id"],
                include=["org"],
                name="events_delivery_endpoint",
            ),
        ),
        migrations.AddConstraint(
            model_name="delivery",
            constraint=models.UniqueConstraint(
                fields=("event", "endpoint"), name="events_delivery_once"
            ),
        ),
    ]
