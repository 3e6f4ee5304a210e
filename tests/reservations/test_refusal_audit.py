"""A booking refused by access control is in the audit log; a clash with a booking is not."""

from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone

from audit.models import AuditEvent
from reservations.models import Reservation
from reservations.services import create_reservation

pytestmark = pytest.mark.django_db


def tomorrow(hours=2):
    start = (timezone.now() + timedelta(days=1)).replace(minute=0, second=0, microsecond=0)
    return start, start + timedelta(hours=hours)


def test_a_booking_without_a_grant_is_refused_and_audited(owner, gpus):
    start, end = tomorrow()
    with pytest.raises(ValidationError):
        create_reservation(owner, title="t", devices=gpus[:2], start=start, end=end)
    assert not Reservation.objects.exists()
    event = AuditEvent.objects.get(action="reservation.refused")
    assert event.actor == owner and "node-1" in event.target
    assert event.detail["reasons"] and event.detail["start"] == start.isoformat()


def test_the_api_refusal_is_audited_too(client, owner, gpus):
    start, end = tomorrow()
    client.force_login(owner)
    body = {
        "title": "t",
        "devices": [gpus[0].pk],
        "start": start.isoformat(),
        "end": end.isoformat(),
    }
    response = client.post("/api/reservations/", body, content_type="application/json")
    assert response.status_code == 400
    assert AuditEvent.objects.filter(action="reservation.refused", actor=owner).count() == 1


def test_a_clash_with_another_booking_is_not_audited(owner, other_user, gpus, everyone_may_book):
    start, end = tomorrow()
    create_reservation(owner, title="mine", devices=gpus[:1], start=start, end=end)
    with pytest.raises(ValidationError):
        create_reservation(other_user, title="late", devices=gpus[:1], start=start, end=end)
    assert not AuditEvent.objects.filter(action="reservation.refused").exists()


def test_an_edit_refused_by_access_control_is_audited_and_changes_nothing(owner, gpus):
    from datetime import time

    from accesscontrol.models import Grant, Window
    from reservations.services import update_reservation

    grant = Grant.objects.create(name="mornings", scope=Grant.Scope.ALL)
    grant.users.add(owner)
    Window.objects.create(grant=grant, weekdays="0123456", start=time(0), end=time(12))
    start = tomorrow()[0].replace(hour=8)
    booking = create_reservation(
        owner, title="t", devices=gpus[:1], start=start, end=start + timedelta(hours=1)
    )
    with pytest.raises(ValidationError):
        update_reservation(booking, owner, end=start + timedelta(hours=6))
    booking.refresh_from_db()
    assert booking.end == start + timedelta(hours=1)
    assert AuditEvent.objects.filter(action="reservation.refused", actor=owner).count() == 1
