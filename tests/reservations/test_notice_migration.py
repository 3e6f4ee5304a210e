"""Migration reservations 0006: the notices mailed before the upgrade (SentNotification rows)
become sent deliveries, so nobody is mailed them again; going back restores the rows."""

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db import connection
from django.db.migrations.loader import MigrationLoader
from django.utils import timezone

from notifications.models import Channel, Delivery
from notifications.send import send_due
from reservations import notifications
from reservations.models import Reservation
from tests.notifications.conftest import receiver  # noqa: F401 (fixture)

pytestmark = pytest.mark.django_db(transaction=True)
BEFORE = ("reservations", "0005_slot_device_end")
AFTER = ("reservations", "0006_notices_through_notifications")


def migrate(target):
    call_command("migrate", *target, verbosity=0)


def old_models():
    return MigrationLoader(connection).project_state(BEFORE).apps


@pytest.fixture
def before_the_upgrade(owner, other_user, receiver):  # noqa: F811
    """Two bookings start soon, each reminded by the older code: by mail at the owner's
    address, and on other_user's chat channel through the notifications app. other_user
    has chosen channels (chat, and mail at a lab address); owner has none."""
    start = timezone.now() + timedelta(minutes=10)
    bookings = [
        Reservation.objects.create(owner=user, title=f"{user}'s", start=start,
                                   end=start + timedelta(hours=1))
        for user in (owner, other_user)
    ]  # fmt: skip
    chat = Channel.objects.create(user=other_user, kind="slack", target=receiver.url)
    Channel.objects.create(user=other_user, kind="email", target="other@lab.example.org")
    Delivery.objects.create(channel=chat, event="booking_starts", state="sent",
                            key=f"reservation-{bookings[1].pk}-starts-0", subject="s", text="t",
                            next_try_at=timezone.now())  # fmt: skip
    migrate(BEFORE)
    sent_at = timezone.now() - timedelta(minutes=3)
    SentNotification = old_models().get_model("reservations", "SentNotification")
    for booking in bookings:
        SentNotification.objects.create(reservation_id=booking.pk, kind="starts")
    SentNotification.objects.update(sent=sent_at)
    yield bookings, sent_at
    # Every app at its latest migration, as the other tests expect the schema, whatever
    # happened here (AFTER is not the last one: later migrations build on it).
    call_command("migrate", verbosity=0)


def test_mailed_notices_are_carried_over_and_not_mailed_again(
    before_the_upgrade,
    owner,
    other_user,
    settings,
    smtp,
    receiver,  # noqa: F811
):
    bookings, sent_at = before_the_upgrade
    migrate(AFTER)
    carried = Delivery.objects.filter(channel__kind="email").order_by("channel__user")
    assert [(d.channel.user, d.channel.target) for d in carried] == [
        (owner, ""),  # owner had no channel: their default mail channel, made now
        (other_user, "other@lab.example.org"),  # each of other_user's mail channels
    ]
    assert {d.key for d in carried} == {f"reservation-{b.pk}-starts-0" for b in bookings}
    assert all(d.sent_at == sent_at and d.created == sent_at for d in carried)
    assert "Your reservation 'owner's' starts soon" in [d.subject for d in carried]
    settings.RESERVATION_REMIND_START_MINUTES = 30
    notifications.send_due()  # the reminder schedule's next run, after the upgrade
    send_due()
    assert smtp.messages == [] and receiver.received == []  # nobody is told again
    assert Delivery.objects.count() == 3


def test_going_back_fills_the_old_table_again(before_the_upgrade, owner):
    bookings, sent_at = before_the_upgrade
    migrate(AFTER)
    migrate(BEFORE)
    SentNotification = old_models().get_model("reservations", "SentNotification")
    rows = SentNotification.objects.order_by("reservation_id")
    assert [(r.reservation_id, r.kind, r.device_key) for r in rows] == [
        (b.pk, "starts", 0) for b in bookings
    ]
    assert all(r.sent == sent_at for r in rows)
