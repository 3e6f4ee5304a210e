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
