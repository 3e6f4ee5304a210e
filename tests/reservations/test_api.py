"""The reservations API: the documented shape, errors, and who may do what."""

import pytest

from reservations.models import Reservation
from tests.reservations.test_booking import book, tomorrow


@pytest.fixture
def booking(owner, gpus, everyone_may_book):
    return book(owner, gpus[:2], tomorrow(9), tomorrow(12), title="mine")


def payload(gpus, start=9, end=12):
    return {
        "title": "train",
        "devices": [g.pk for g in gpus],
        "start": tomorrow(start).isoformat(),
        "end": tomorrow(end).isoformat(),
    }


def test_anonymous_users_get_nothing(client, booking):
    assert client.get("/api/reservations/").status_code == 403
    assert client.delete(f"/api/reservations/{booking.pk}/").status_code == 403
    assert Reservation.objects.get().status == Reservation.Status.CONFIRMED


@pytest.mark.parametrize("persona", ["owner", "other_user", "admin_user"])
def test_signed_in_users_see_the_calendar(client, booking, persona, request):
    client.force_login(request.getfixturevalue(persona))
    data = client.get("/api/reservations/").json()
    assert data[0]["title"] == "mine" and data[0]["owner"] == "owner"


def test_a_user_books_several_gpus_in_one_request(client, other_user, gpus, everyone_may_book):
    client.force_login(other_user)
    response = client.post("/api/reservations/", payload(gpus[:4]), content_type="application/json")
    assert response.status_code == 201, response.json()
    assert sorted(response.json()["devices"]) == sorted(g.pk for g in gpus)
    assert response.json()["owner"] == "other"


def test_a_refused_booking_gets_field_errors_and_a_detail(client, other_user, booking, gpus):
    client.force_login(other_user)
    response = client.post(
        "/api/reservations/", payload(gpus[1:2], 10, 11), content_type="application/json"
    )
    assert response.status_code == 400
    assert "already reserved by owner" in response.json()["detail"]
    assert "devices" in response.json()
    assert Reservation.objects.count() == 1


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"title": "x", "devices": [999], "start": "2026-01-01T00:00Z", "end": "x"},
        {"title": "x", "devices": "all", "start": None, "end": None},
    ],
)
def test_malformed_input_is_a_400_not_a_500(client, owner, body):
    client.force_login(owner)
    response = client.post("/api/reservations/", body, content_type="application/json")
    assert response.status_code == 400


@pytest.mark.parametrize("not_an_id", [1.5, True, None, [1]])
def test_device_ids_must_be_whole_numbers(client, owner, gpus, not_an_id):
    # int() alone would read 1.5 and true as GPU 1 and book it.
    client.force_login(owner)
    body = payload(gpus[:1], 10, 11) | {"devices": [gpus[0].pk, not_an_id]}
    response = client.post("/api/reservations/", body, content_type="application/json")
    assert response.status_code == 400
    assert "devices" in response.json()
    assert not Reservation.objects.exists()


def test_a_fractional_device_id_is_named_as_such(client, owner, gpus):
    client.force_login(owner)
    body = payload(gpus[:1], 10, 11) | {"devices": [1.5]}
    response = client.post("/api/reservations/", body, content_type="application/json")
    assert response.status_code == 400
    assert response.json()["devices"] == ["A valid integer is required."]


@pytest.mark.parametrize(
    ("persona", "code"), [("other_user", 403), ("owner", 204), ("admin_user", 204)]
)
def test_only_the_owner_or_an_admin_cancels(client, booking, persona, code, request):
    client.force_login(request.getfixturevalue(persona))
    assert client.delete(f"/api/reservations/{booking.pk}/").status_code == code
    booking.refresh_from_db()
    cancelled = booking.status == Reservation.Status.CANCELLED
    assert cancelled == (code == 204)


def test_another_user_cannot_edit(client, booking, other_user):
    client.force_login(other_user)
    response = client.patch(
        f"/api/reservations/{booking.pk}/", {"title": "stolen"}, content_type="application/json"
    )
    assert response.status_code == 403
    booking.refresh_from_db()
    assert booking.title == "mine"


PERSONAS = ["anonymous", "owner", "other_user", "admin_user"]


def signed_in(client, request, persona):
    if persona != "anonymous":
        client.force_login(request.getfixturevalue(persona))
    return client


@pytest.mark.parametrize(
    ("persona", "code"),
    [("anonymous", 403), ("owner", 200), ("other_user", 200), ("admin_user", 200)],
)
def test_reading_one_booking(client, booking, request, persona, code):
    # The calendar is the lab's: every signed-in user sees who booked what.
    response = signed_in(client, request, persona).get(f"/api/reservations/{booking.pk}/")
    assert response.status_code == code
    if code == 200:
        assert response.json()["title"] == "mine"


@pytest.mark.parametrize(
    ("persona", "code"),
    [("anonymous", 403), ("owner", 200), ("other_user", 403), ("admin_user", 200)],
)
def test_editing_a_booking(client, booking, request, persona, code):
    client = signed_in(client, request, persona)
    body = {"title": "renamed", "end": tomorrow(13).isoformat()}
    response = client.patch(
        f"/api/reservations/{booking.pk}/", body, content_type="application/json"
    )
    assert response.status_code == code
    booking.refresh_from_db()
    edited = (booking.title, booking.end) == ("renamed", tomorrow(13))
    assert edited == (code == 200)
    assert booking.slots.filter(end=tomorrow(13)).count() == (2 if edited else 0)


def test_anonymous_users_cannot_book(client, gpus, everyone_may_book):
    response = client.post("/api/reservations/", payload(gpus[:1]), content_type="application/json")
    assert response.status_code == 403
    assert not Reservation.objects.exists()
