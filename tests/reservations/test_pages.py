"""Permission matrix of every reservations page, and their errors. (The calendar reads and
writes through the API: tests/reservations/test_calendar_api.py.)"""

import pytest

from reservations.ical import feed_for
from reservations.models import CalendarChoice
from tests.reservations.test_booking import book, tomorrow

PERSONAS = ["anonymous", "owner", "other_user", "admin_user"]


@pytest.fixture
def booking(owner, gpus, everyone_may_book):
    return book(owner, gpus[:2], tomorrow(9), tomorrow(12), title="mine")


def sign_in(client, persona, request):
    if persona != "anonymous":
        client.force_login(request.getfixturevalue(persona))


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
