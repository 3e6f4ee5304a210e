"""The events that were mailed directly before they came through the notifications app
(a withdrawn booking, a preempted queued job, the admins' copy of an intrusion) are added to
every existing channel: a channel's event list was "everything there was" when it was
made, and these were told by mail regardless of it. Without this, people with a channel
from before would silently stop hearing of them. Each person narrows them afterwards on
their notifications page, as with any event.

Reversible: going back removes exactly these keys, which the older code does not know (its
forms would refuse a channel that lists them)."""

from django.db import migrations

# Written out, not imported: this migration must mean the same whatever the code says later.
ADDED = ["booking_withdrawn", "intruder_admin", "queued_stopped"]


def add_events(apps, schema_editor):
    Channel = apps.get_model("notifications", "Channel")
    for channel in Channel.objects.all():
        missing = [event for event in ADDED if event not in channel.events]
        if missing:
            channel.events = channel.events + missing
            channel.save(update_fields=["events"])


def remove_events(apps, schema_editor):
    Channel = apps.get_model("notifications", "Channel")
    for channel in Channel.objects.all():
        kept = [event for event in channel.events if event not in ADDED]
        if kept != channel.events:
            channel.events = kept
            channel.save(update_fields=["events"])


class Migration(migrations.Migration):
    dependencies = [("notifications", "0001_channels_and_deliveries")]

    operations = [migrations.RunPython(add_events, remove_events)]
