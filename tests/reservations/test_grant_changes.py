"""When grants shrink, bookings no longer covered are withdrawn and their owners told."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.utils import timezone
from django_q.conf import Conf

from notifications.models import Delivery
from notifications.send import send_due
from reservations.models import Reservation
from tests.reservations.test_booking import book, tomorrow


@pytest.fixture
def tasks_run_inline(monkeypatch):
    """Run django-q2 tasks in the caller (the real task code, without a cluster)."""
    monkeypatch.setattr(Conf, "SYNC", True)


def test_losing_access_withdraws_future_and_ongoing_bookings(
    owner,
    other_user,
    gpus,
    everyone_may_book,
    tasks_run_inline,
    django_capture_on_commit_callbacks,
    smtp,
):
    future = book(owner, gpus[:1], tomorrow(9), tomorrow(12), title="future")
    now = timezone.now()
    ongoing = book(
        owner, gpus[1:2], now - timedelta(seconds=10), now + timedelta(hours=1), title="ongoing"
    )
    untouched = book(other_user, gpus[2:3], tomorrow(9), tomorrow(12))
    with django_capture_on_commit_callbacks(execute=True):
        Group.objects.get(name="everyone").user_set.remove(owner)
    future.refresh_from_db()
    ongoing.refresh_from_db()
    untouched.refresh_from_db()
    assert future.status == Reservation.Status.CANCELLED
    assert "Cancelled by the service" in future.note and "node-1:0" in future.note
    assert ongoing.status == Reservation.Status.CONFIRMED and ongoing.end <= timezone.now()
    assert untouched.status == Reservation.Status.CONFIRMED
    told = Delivery.objects.filter(event="booking_withdrawn", channel__user=owner)
    assert told.count() == 2
    assert send_due() == 2  # as the notifications sender does
    assert smtp.to() == [["owner@example.org"]] * 2
    assert "Subject: Your reservation 'future' was cancelled" in "".join(
        smtp.text(i) for i in (0, 1)
    )


def test_access_growing_back_revives_nothing(
    owner, gpus, everyone_may_book, tasks_run_inline, django_capture_on_commit_callbacks
):
    booking = book(owner, gpus[:1], tomorrow(9), tomorrow(12))
    everyone = Group.objects.get(name="everyone")
    with django_capture_on_commit_callbacks(execute=True):
        everyone.user_set.remove(owner)
    with django_capture_on_commit_callbacks(execute=True):
        everyone.user_set.add(owner)
    booking.refresh_from_db()
    assert booking.status == Reservation.Status.CANCELLED


def test_a_grant_change_is_handed_to_the_workers(
    owner, gpus, everyone_may_book, django_capture_on_commit_callbacks
):
    from django_q.brokers import get_broker

    broker = get_broker()
    broker.purge_queue()
    booking = book(owner, gpus[:1], tomorrow(9), tomorrow(12))
    with django_capture_on_commit_callbacks(execute=True):
        Group.objects.get(name="everyone").user_set.remove(owner)
    assert broker.queue_size() >= 1  # queued, not done inside the admin's request
    booking.refresh_from_db()
    assert booking.status == Reservation.Status.CONFIRMED
    broker.purge_queue()


def test_a_mail_server_away_keeps_no_booking_from_being_withdrawn(
    owner,
    other_user,
    gpus,
    everyone_may_book,
    tasks_run_inline,
    django_capture_on_commit_callbacks,
    smtp,
):
    from core.models import Activity
    from reservations.tasks import RECHECK_ACTIVITY

    smtp.down()  # the mail server is away: every send fails
    first = book(owner, gpus[:1], tomorrow(9), tomorrow(12), title="first")
    second = book(other_user, gpus[1:2], tomorrow(9), tomorrow(12), title="second")
    with django_capture_on_commit_callbacks(execute=True):
        Group.objects.get(name="everyone").user_set.clear()
    for booking in (first, second):
        booking.refresh_from_db()
        assert booking.status == Reservation.Status.CANCELLED
    activity = Activity.objects.get(name=RECHECK_ACTIVITY)
    assert activity.last_summary == "2 reservation(s) withdrawn" and not activity.last_error
    assert send_due() == 0
    failed = Delivery.objects.filter(event="booking_withdrawn")
    assert [(d.state, d.attempts) for d in failed] == [("pending", 1)] * 2
    assert all("Connection refused" in d.last_error for d in failed)
    smtp.up()
    failed.update(next_try_at=timezone.now())  # the backoff has passed
    assert send_due() == 2
    assert sorted(smtp.to()) == [["other@example.org"], ["owner@example.org"]]
