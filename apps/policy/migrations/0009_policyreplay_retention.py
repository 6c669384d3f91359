"""Finished policy replays get a retention (``policy_replays_prune``): the partial index its
walk reads, and the replays proposals name marked as kept (a proposal keeps only the id)."""

from django.db import migrations, models


def mark_proposals_replays(apps, schema_editor):
    PolicyProposal = apps.get_model("policy", "PolicyProposal")
    PolicyReplay = apps.get_model("policy", "PolicyReplay")
    named = PolicyProposal.objects.filter(replay__isnull=False).values_list("replay", flat=True)
    replay_ids = [replay["replay_id"] for replay in named if isinstance(replay, dict)]
    PolicyReplay.objects.filter(replay_id__in=replay_ids).update(for_proposal=True)


class Migration(migrations.Migration):
    dependencies = [("policy", "0008_policyreplay_row_level_security")]

    operations = [
        migrations.AddField(
            model_name="policyreplay",
            name="for_proposal",
            field=models.BooleanField(default=False),
        ),
        migrations.RunPython(mark_proposals_replays, migrations.RunPython.noop),
        migrations.AddIndex(
            model_name="policyreplay",
            index=models.Index(
                condition=models.Q(("finished_at__isnull", False), ("for_proposal", False)),
                fields=["finished_at", "id"],
                name="policy_replay_finished",
            ),
        ),
    ]
