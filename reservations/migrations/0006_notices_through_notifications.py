"""Reservation notices (reminders, idle warnings) are told through the notifications app,
whose deliveries are unique per (channel, key): SentNotification, the second table that
kept them from going out twice, goes.

Its rows are carried over first, so nobody is mailed again after the upgrade what was mailed
before it: for each row, a delivery marked sent, at the time it was sent, on each of the
owner's mail channels, under the key the reminders now use
(reservations.notifications.notice_key). An owner without any channel gets their default
mail channel now, as their first notice would have made it. (Chat channels have their
deliveries already: the reminders told chat through the notifications app before.)

Reversible: going back makes the table again and fills it from the reservation notices on
mail channels that are sent or still to be sent (the older code would mail those again),
so the older code's de-duplication holds too. The deliveries stay.
"""

import re
from itertools import groupby

from django.db import migrations

EVENTS = {"starts": "booking_starts", "ends": "booking_ends", "idle": "idle_warning"}
SUBJECTS = {
    "starts": "Your reservation '{}' starts soon",
    "ends": "Your reservation '{}' ends soon",
    "idle": "A reserved GPU of '{}' was idle",
}
CARRIED = (
    "Mailed before reservation notices came through the notifications app; recorded here so "
    "that it is not sent again."
)
# Every event as of notifications 0002: a default channel wants them all.
ALL_EVENTS = [
    "booking_starts", "booking_ends", "idle_warning", "booking_released", "booking_withdrawn",
    "intruder", "on_others_gpu", "intruder_admin", "job_ended", "queued_started",
    "queued_waiting", "queued_stopped",
]  # fmt: skip
KEY = re.compile(r"^reservation-(\d+)-(starts|ends|idle)-(\d+)$")


def key(sent) -> str:
    return f"reservation-{sent.reservation_id}-{sent.kind}-{sent.device_key}"


def mail_channels(Channel, owner) -> list:
    channels = list(Channel.objects.filter(user=owner, kind="email"))
    if not channels and owner.email and not Channel.objects.filter(user=owner).exists():
        channels = [Channel.objects.create(user=owner, kind="email", target="", events=ALL_EVENTS)]
    return channels


def carry_over(apps, schema_editor):
    SentNotification = apps.get_model("reservations", "SentNotification")
    Channel = apps.get_model("notifications", "Channel")
    Delivery = apps.get_model("notifications", "Delivery")
    rows = SentNotification.objects.select_related("reservation__owner").order_by(
        "reservation__owner", "pk"
    )
    for _, group in groupby(rows.iterator(chunk_size=2000), lambda s: s.reservation.owner_id):
        sent_rows = list(group)
        channels = mail_channels(Channel, sent_rows[0].reservation.owner)
        told = set(
            Delivery.objects.filter(channel__in=channels, key__startswith="reservation-")
            .values_list("channel_id", "key")
        )
        new = [
            Delivery(
                channel=channel, event=EVENTS[sent.kind], key=key(sent),
                subject=SUBJECTS[sent.kind].format(sent.reservation.title)[:255], text=CARRIED,
                state="sent", attempts=1, next_try_at=sent.sent, sent_at=sent.sent,
            )
            for sent in sent_rows
            for channel in channels
            if (channel.pk, key(sent)) not in told
        ]  # fmt: skip
        Delivery.objects.bulk_create(new, batch_size=500)
        for delivery in new:  # "created" is set on insert: when it was really sent, after
            delivery.created = delivery.sent_at
        Delivery.objects.bulk_update(new, ["created"], batch_size=500)


def carry_back(apps, schema_editor):
    SentNotification = apps.get_model("reservations", "SentNotification")
    Reservation = apps.get_model("reservations", "Reservation")
    Delivery = apps.get_model("notifications", "Delivery")
    told = Delivery.objects.filter(
        channel__kind="email",
        key__startswith="reservation-",
        state__in=["sent", "pending", "sending"],
    )
    found: dict = {}
    for notice_key, created in told.values_list("key", "created").order_by("created"):
        if match := KEY.match(notice_key):
            found.setdefault((int(match[1]), match[2], int(match[3])), created)
    existing = set(Reservation.objects.values_list("pk", flat=True))
    rows = [
        SentNotification(reservation_id=reservation, kind=kind, device_key=device)
        for (reservation, kind, device) in found
        if reservation in existing
    ]
    SentNotification.objects.bulk_create(rows, batch_size=500)
    for row in rows:  # "sent" is set on insert: when it was told, after
        row.sent = found[(row.reservation_id, row.kind, row.device_key)]
    SentNotification.objects.bulk_update(rows, ["sent"], batch_size=500)


class Migration(migrations.Migration):
    dependencies = [
        ("reservations", "0005_slot_device_end"),
        ("notifications", "0002_events_formerly_mailed"),
    ]

    operations = [
        migrations.RunPython(carry_over, carry_back),
        migrations.DeleteModel(name="SentNotification"),
    ]
