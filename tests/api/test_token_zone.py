"""Times in API answers come in the reader's zone, also for a token's user: DRF authenticates
inside the view, where the pages' zone middleware never saw them."""

import pytest

from accesscontrol.services import profile_for
from monitoring.models import Device
from reservations.services import create_reservation

from .conftest import bearer, tomorrow


@pytest.fixture
def booking(lab, everyone_may_book, owner, settings):
    settings.SITE_TIME_ZONE = "UTC"
    profile = profile_for(owner)
    profile.time_zone = "Asia/Tokyo"  # +09:00 all year: no DST to make the test depend on
    profile.save()
    start = tomorrow(9)
    return create_reservation(
        owner, title="thesis", devices=[Device.objects.get(index=0)], start=start,
        end=start.replace(hour=11),
    )  # fmt: skip


def test_it_answers_a_token_user_in_their_own_zone(client, booking, owner_secret):
    response = client.get(f"/api/reservations/{booking.pk}/", **bearer(owner_secret))
    assert response.status_code == 200
    assert response.json()["start"].endswith("+09:00")


def test_it_answers_a_session_user_in_the_same_zone(client, booking, owner):
    client.force_login(owner)
    response = client.get(f"/api/reservations/{booking.pk}/")
    assert response.json()["start"].endswith("+09:00")


def test_the_zone_ends_with_the_token_request(client, booking, owner_secret, other_user):
    client.get(f"/api/reservations/{booking.pk}/", **bearer(owner_secret))
    client.force_login(other_user)  # no zone of their own: the site's
    response = client.get(f"/api/reservations/{booking.pk}/")
    assert response.json()["start"].endswith("Z") or response.json()["start"].endswith("+00:00")
