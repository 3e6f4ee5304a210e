"""When grants shrink, bookings no longer covered are withdrawn and their owners told."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.core import mail
from django.utils import timezone
from django_q.conf import Conf

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
    assert sorted(m.to[0] for m in mail.outbox) == ["owner@example.org"] * 2
    assert "was cancelled" in mail.outbox[0].subject


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


def test_a_mail_that_fails_keeps_no_booking_from_being_withdrawn(
    owner,
    other_user,
    gpus,
    everyone_may_book,
    tasks_run_inline,
    django_capture_on_commit_callbacks,
    settings,
):
    from core.models import Activity
    from reservations.tasks import RECHECK_ACTIVITY
    from tests.realparts import free_port

    # A real SMTP backend pointed at a port where nothing listens: every send fails.
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_TIMEOUT = "127.0.0.1", free_port(), 2
    first = book(owner, gpus[:1], tomorrow(9), tomorrow(12), title="first")
    second = book(other_user, gpus[1:2], tomorrow(9), tomorrow(12), title="second")
    with django_capture_on_commit_callbacks(execute=True):
        Group.objects.get(name="everyone").user_set.clear()
    for booking in (first, second):
        booking.refresh_from_db()
        assert booking.status == Reservation.Status.CANCELLED
    activity = Activity.objects.get(name=RECHECK_ACTIVITY)
    assert "2 reservation(s) withdrawn; could not mail" in activity.last_error
    assert "owner" in activity.last_error and "other" in activity.last_error
