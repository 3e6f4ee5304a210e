"""Permission matrix of every reservations page and calendar endpoint, and their errors."""

import json

import pytest

from reservations.ical import feed_for
from reservations.models import CalendarChoice, Reservation
from tests.reservations.test_booking import book, tomorrow

PERSONAS = ["anonymous", "owner", "other_user", "admin_user"]


@pytest.fixture
def booking(owner, gpus, everyone_may_book):
    return book(owner, gpus[:2], tomorrow(9), tomorrow(12), title="mine")


def sign_in(client, persona, request):
    if persona != "anonymous":
        client.force_login(request.getfixturevalue(persona))


def post_json(client, url, body):
    return client.post(url, json.dumps(body), content_type="application/json")


@pytest.mark.parametrize(
    ("persona", "code"),
    [("anonymous", 302), ("owner", 200), ("other_user", 200), ("admin_user", 200)],
)
@pytest.mark.parametrize(
    "url", ["/reservations/calendar/", "/reservations/overview/", "/reservations/mine/"]
)
def test_pages_need_a_sign_in(client, booking, request, persona, code, url):
    sign_in(client, persona, request)
    response = client.get(url)
    assert response.status_code == code
    if code == 302:
        assert "/accounts/login/" in response["Location"]


@pytest.mark.parametrize(
    ("persona", "code"),
    [("anonymous", 302), ("owner", 403), ("other_user", 403), ("admin_user", 200)],
)
def test_the_usage_summary_is_for_staff(client, booking, request, persona, code):
    sign_in(client, persona, request)
    assert client.get("/reservations/usage/").status_code == code


@pytest.mark.parametrize("persona", PERSONAS)
def test_the_events_feed_answers_json_to_everyone_signed_in(client, booking, request, persona):
    sign_in(client, persona, request)
    day = tomorrow(0).date()
    response = client.get(f"/reservations/calendar/events/?start={day}T00:00&end={day}T23:00")
    assert response.status_code == (403 if persona == "anonymous" else 200)
    if persona != "anonymous":
        boxes = [e for e in response.json()["events"] if e.get("display") != "background"]
        assert [b["title"] for b in boxes] == ["owner: mine"]
        assert ("mine" in boxes[0]["classNames"]) == (persona == "owner")


@pytest.mark.parametrize("persona", PERSONAS)
def test_everyone_signed_in_sees_details_but_only_owner_and_admin_may_change(
    client, booking, request, persona
):
    sign_in(client, persona, request)
    response = client.get(f"/reservations/calendar/{booking.pk}/")
    if persona == "anonymous":
        assert response.status_code == 403
        return
    assert response.status_code == 200
    assert response.json()["may_change"] == (persona in ("owner", "admin_user"))


@pytest.mark.parametrize(
    ("persona", "code"),
    [("anonymous", 403), ("owner", 200), ("other_user", 403), ("admin_user", 200)],
)
def test_only_owner_or_admin_edits(client, booking, request, persona, code):
    sign_in(client, persona, request)
    url = f"/reservations/calendar/{booking.pk}/"
    response = post_json(client, url, {"title": "renamed", "end": f"{tomorrow(13):%Y-%m-%dT%H:%M}"})
    assert response.status_code == code
    booking.refresh_from_db()
    assert (booking.title == "renamed") == (code == 200)


@pytest.mark.parametrize(
    ("persona", "code"),
    [("anonymous", 403), ("owner", 200), ("other_user", 403), ("admin_user", 200)],
)
def test_only_owner_or_admin_cancels(client, booking, request, persona, code):
    sign_in(client, persona, request)
    assert client.post(f"/reservations/calendar/{booking.pk}/cancel/").status_code == code
    booking.refresh_from_db()
    assert (booking.status == Reservation.Status.CANCELLED) == (code == 200)


@pytest.mark.parametrize(
    ("persona", "code"),
    [("anonymous", 403), ("owner", 201), ("other_user", 201), ("admin_user", 201)],
)
def test_signed_in_users_book_through_the_calendar(
    client, gpus, everyone_may_book, request, persona, code
):
    sign_in(client, persona, request)
    body = {
        "title": "t",
        "devices": [g.pk for g in gpus],
        "start": f"{tomorrow(9):%Y-%m-%dT%H:%M}",
        "end": f"{tomorrow(11):%Y-%m-%dT%H:%M}",
    }
    response = post_json(client, "/reservations/calendar/book/", body)
    assert response.status_code == code
    assert Reservation.objects.count() == (1 if code == 201 else 0)


def test_a_clash_gets_the_same_message_as_the_api(client, booking, other_user, gpus):
    client.force_login(other_user)
    body = {
        "title": "t",
        "devices": [gpus[1].pk],
        "start": f"{tomorrow(10):%Y-%m-%dT%H:%M}",
        "end": f"{tomorrow(11):%Y-%m-%dT%H:%M}",
    }
    page = post_json(client, "/reservations/calendar/book/", body)
    api_body = dict(body, start=tomorrow(10).isoformat(), end=tomorrow(11).isoformat())
    api = post_json(client, "/api/reservations/", api_body)
    assert page.status_code == api.status_code == 400
    assert page.json()["detail"] == api.json()["detail"]
    assert "already reserved by owner" in page.json()["detail"]
    assert Reservation.objects.count() == 1


A_GPU = object()  # stands for the id of an existing GPU


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"devices": [A_GPU], "start": "2030-01-01T09:00", "end": "2030-01-01T10:00"}, "title"),
        ({"title": "x", "devices": [999999], "start": "2030-01-01T09:00", "end": "x"}, "devices"),
        ({"title": "x", "devices": "a,b", "start": "2030-01-01T09:00", "end": "x"}, "devices"),
        ({"title": "x", "devices": [], "start": "soon", "end": "later"}, "start"),
        ({"title": "x", "devices": [10**30], "start": "2030-01-01T09:00", "end": "x"}, "devices"),
        ({"title": "x", "devices": [A_GPU], "start": "9999-12-31T23:00", "end": "x"}, "start"),
        (
            {"title": "x", "devices": [A_GPU, 1.5], "start": "2030-01-01T09:00", "end": "x"},
            "devices",
        ),
        (
            {"title": "x", "devices": [A_GPU, True], "start": "2030-01-01T09:00", "end": "x"},
            "devices",
        ),
    ],
)
def test_bad_bookings_get_a_400_naming_the_field(client, owner, gpus, body, field):
    # Primary keys are not reset between tests on PostgreSQL, so a real GPU's id
    # is filled in here rather than written into the parameters.
    if isinstance(body["devices"], list):
        body = dict(body, devices=[gpus[0].pk if d is A_GPU else d for d in body["devices"]])
    client.force_login(owner)
    response = post_json(client, "/reservations/calendar/book/", body)
    assert response.status_code == 400
    assert field in response.json() and response.json()["detail"]
    assert not Reservation.objects.exists()


def test_not_json_is_a_400(client, owner):
    client.force_login(owner)
    response = client.post("/reservations/calendar/book/", "{", content_type="application/json")
    assert response.status_code == 400


@pytest.mark.parametrize(
    "query",
    [
        "start=x&end=y",
        "start=2030-01-02T00:00&end=2030-01-01T00:00",
        "",
        f"start=2030-01-01T00:00&end=2030-01-02T00:00&devices={10**30}",
    ],
)
def test_bad_feed_ranges_are_a_400(client, owner, query):
    client.force_login(owner)
    assert client.get(f"/reservations/calendar/events/?{query}").status_code == 400


def test_unknown_reservation_is_a_404(client, owner):
    client.force_login(owner)
    assert client.get("/reservations/calendar/424242/").status_code == 404


@pytest.mark.parametrize(
    "query", ["days=0", "days=x", "start=yesterday", "start=9999-12-31", "start=0001-01-01"]
)
@pytest.mark.parametrize("page", ["overview", "usage"])
def test_bad_overview_spans_are_a_400(client, admin_user, query, page):
    client.force_login(admin_user)
    assert client.get(f"/reservations/{page}/?{query}").status_code == 400


@pytest.mark.parametrize("ids", ["abc", str(10**30)])
def test_bad_calendar_choices_are_a_400(client, owner, ids):
    client.force_login(owner)
    response = client.post("/reservations/overview/", {"devices": ids})
    assert response.status_code == 400
    assert b"Ids are whole numbers" in response.content
    assert not CalendarChoice.objects.exists()


@pytest.mark.parametrize(
    ("persona", "code"),
    [("anonymous", 302), ("owner", 302), ("other_user", 302), ("admin_user", 302)],
)
def test_renewing_the_feed_is_per_user(client, owner, request, persona, code):
    old = feed_for(owner).token
    sign_in(client, persona, request)
    assert client.post("/reservations/feed/renew/").status_code == code
    assert (feed_for(owner).token != old) == (persona == "owner")


@pytest.mark.parametrize("persona", PERSONAS)
def test_the_ical_feed_needs_its_token_not_a_session(client, booking, owner, request, persona):
    sign_in(client, persona, request)
    token = feed_for(owner).token
    assert client.get(f"/reservations/feed/{token}.ics").status_code == 200
    assert client.get(f"/reservations/feed/{token[:-1]}x.ics").status_code == 404
