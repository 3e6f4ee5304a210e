"""What the week calendar asks of the API, for every persona: a booking's details (with what
they mean to the reader), the week's bookings, and bookings made, edited and cancelled with
ISO instants. The calendar's own JSON endpoints are gone."""

import json
from datetime import datetime, timedelta

import pytest

from reservations.models import Reservation
from tests.reservations.test_booking import book, tomorrow

PERSONAS = ["anonymous", "owner", "other_user", "admin_user"]


@pytest.fixture
def booking(owner, gpus, everyone_may_book):
    return book(owner, gpus[:2], tomorrow(9), tomorrow(12), title="mine")


def sign_in(client, persona, request):
    if persona != "anonymous":
        client.force_login(request.getfixturevalue(persona))
    return client


def send(client, method, url, body=None):
    return getattr(client, method)(url, json.dumps(body or {}), content_type="application/json")


@pytest.mark.parametrize(
    ("persona", "code", "may_change"),
    [
        ("anonymous", 403, None),
        ("owner", 200, True),
        ("other_user", 200, False),
        ("admin_user", 200, True),
    ],
)
def test_the_details_say_what_the_reader_may_do(
    client, booking, request, persona, code, may_change
):
    response = sign_in(client, persona, request).get(f"/api/reservations/{booking.pk}/")
    assert response.status_code == code
    if code != 200:
        assert response.json()["detail"]
        return
    details = response.json()
    assert details["may_change"] is may_change
    assert details["status_display"] == "Confirmed"
    assert details["device_names"] == ["node-1:0", "node-1:1"]
    assert details["usage"] is None  # not begun
    assert datetime.fromisoformat(details["start"]) == tomorrow(9)  # an instant, with its offset


def test_nobody_may_change_a_cancelled_booking(client, booking, owner, admin_user):
    for user in (owner, admin_user):
        client.force_login(user)
        assert client.get(f"/api/reservations/{booking.pk}/").json()["may_change"] is True
    client.delete(f"/api/reservations/{booking.pk}/")
    for user in (owner, admin_user):
        client.force_login(user)
        details = client.get(f"/api/reservations/{booking.pk}/").json()
        assert details["may_change"] is False and details["status_display"] == "Cancelled"


def test_the_details_give_the_usage_once_it_has_begun(client, booking, other_user):
    Reservation.objects.filter(pk=booking.pk).update(
        usage_final=True,
        used_utilization=42.0,
        used_memory_mib=1000,
        idle_minutes=5,
        busy_minutes=55,
    )
    client.force_login(other_user)
    usage = client.get(f"/api/reservations/{booking.pk}/").json()["usage"]
    assert usage == {
        "utilization": 42.0,
        "memory_mib": 1000.0,
        "idle_minutes": 5.0,
        "busy_minutes": 55.0,
        "final": True,
    }


@pytest.mark.parametrize("persona", PERSONAS)
def test_the_week_is_the_lists_bookings_of_the_gpus_shown(client, booking, request, persona):
    """The calendar's boxes: /api/reservations/ narrowed to the columns and the week."""
    book(booking.owner, [booking.devices.last()], tomorrow(14), tomorrow(15), title="later")
    monday = tomorrow(0) - timedelta(days=tomorrow(0).weekday())
    query = {
        "device": ",".join(str(d.pk) for d in booking.devices.all()),
        "start": monday.isoformat(),
        "end": (monday + timedelta(days=7)).isoformat(),
    }
    response = sign_in(client, persona, request).get("/api/reservations/", query)
    if persona == "anonymous":
        assert response.status_code == 403
        return
    rows = response.json()
    assert [(r["title"], r["owner"], len(r["devices"])) for r in rows] == [
        ("mine", "owner", 2),
        ("later", "owner", 1),
    ]


@pytest.mark.parametrize(
    ("persona", "code"),
    [("anonymous", 403), ("owner", 201), ("other_user", 201), ("admin_user", 201)],
)
def test_signed_in_users_book_with_instants(
    client, gpus, everyone_may_book, request, persona, code
):
    body = {
        "title": "t",
        "devices": [g.pk for g in gpus],
        "start": tomorrow(9).isoformat(),
        "end": tomorrow(11).isoformat(),
    }
    response = send(sign_in(client, persona, request), "post", "/api/reservations/", body)
    assert response.status_code == code
    assert Reservation.objects.count() == (1 if code == 201 else 0)


@pytest.mark.parametrize(
    ("persona", "code"),
    [("anonymous", 403), ("owner", 200), ("other_user", 403), ("admin_user", 200)],
)
def test_only_owner_or_admin_moves_the_end(client, booking, request, persona, code):
    url = f"/api/reservations/{booking.pk}/"
    body = {"title": "renamed", "description": "", "end": tomorrow(13).isoformat()}
    response = send(sign_in(client, persona, request), "patch", url, body)
    assert response.status_code == code
    booking.refresh_from_db()
    assert (booking.title, booking.end == tomorrow(13)) == (
        ("renamed", True) if code == 200 else ("mine", False)
    )


A_GPU = object()  # stands for the id of an existing GPU
SOON, LATER = "2030-01-01T09:00:00Z", "2030-01-01T10:00:00Z"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"devices": [A_GPU], "start": SOON, "end": LATER}, "title"),
        ({"title": " ", "devices": [A_GPU], "start": SOON, "end": LATER}, "title"),
        ({"title": "x", "devices": [999999], "start": SOON, "end": LATER}, "devices"),
        ({"title": "x", "devices": "a,b", "start": SOON, "end": LATER}, "devices"),
        ({"title": "x", "devices": [A_GPU], "start": "soon", "end": LATER}, "start"),
        ({"title": "x", "devices": [A_GPU], "start": None, "end": LATER}, "start"),
        ({"title": "x", "devices": [10**30], "start": SOON, "end": LATER}, "devices"),
        ({"title": "x", "devices": [A_GPU], "start": "9999-12-31T23:00Z", "end": LATER}, "end"),
        ({"title": "x", "devices": [A_GPU, 1.5], "start": SOON, "end": LATER}, "devices"),
        ({"title": "x", "devices": [A_GPU, True], "start": SOON, "end": LATER}, "devices"),
    ],
)
def test_bad_bookings_get_a_400_naming_the_field(client, owner, gpus, body, field):
    # Primary keys are not reset between tests on PostgreSQL, so a real GPU's id
    # is filled in here rather than written into the parameters.
    if isinstance(body["devices"], list):
        body = dict(body, devices=[gpus[0].pk if d is A_GPU else d for d in body["devices"]])
    client.force_login(owner)
    response = send(client, "post", "/api/reservations/", body)
    assert response.status_code == 400
    assert field in response.json() and response.json()["detail"]
    assert not Reservation.objects.exists()


def test_not_json_is_a_400(client, owner):
    client.force_login(owner)
    response = client.post("/api/reservations/", "{", content_type="application/json")
    assert response.status_code == 400 and response.json()["detail"]


def test_unknown_reservation_is_a_404(client, owner):
    client.force_login(owner)
    assert client.get("/api/reservations/424242/").status_code == 404


@pytest.mark.parametrize(
    "url",
    [
        "/reservations/calendar/events/?start=2030-01-01T00:00&end=2030-01-02T00:00",
        "/reservations/calendar/1/",
    ],
)
def test_the_calendars_own_json_endpoints_are_gone(client, owner, url):
    client.force_login(owner)
    assert client.get(url).status_code == 404
    assert client.post("/reservations/calendar/book/", {}).status_code == 404
