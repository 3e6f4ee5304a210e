"""The private iCalendar feed, parsed back with a real parser; API list filters."""

import re
from datetime import timedelta
from urllib.parse import urlencode

import icalendar
import pytest

from reservations.filters import filter_reservations
from reservations.ical import feed_for
from reservations.models import Reservation
from reservations.services import cancel_reservation
from tests.reservations.test_booking import book, tomorrow


@pytest.fixture
def bookings(owner, other_user, gpus, everyone_may_book):
    mine = book(owner, gpus[:2], tomorrow(9), tomorrow(12), title="Train; big, model")
    gone = book(owner, gpus[2:3], tomorrow(13), tomorrow(14), title="gone")
    cancel_reservation(gone, owner)
    theirs = book(other_user, gpus[3:4], tomorrow(9), tomorrow(10), title="theirs")
    return mine, gone, theirs


def test_the_feed_parses_and_holds_only_the_owners_bookings(client, bookings, owner):
    mine, gone, _ = bookings
    Reservation.objects.filter(pk=mine.pk).update(description="line one\nline two " + "x" * 100)
    response = client.get(f"/reservations/feed/{feed_for(owner).token}.ics")
    assert response["Content-Type"].startswith("text/calendar")
    calendar = icalendar.Calendar.from_ical(response.content)
    events = {str(e["SUMMARY"]): e for e in calendar.walk("VEVENT")}
    assert set(events) == {"Train; big, model", "gone"}
    train = events["Train; big, model"]
    assert train.decoded("DTSTART") == tomorrow(9) and train.decoded("DTEND") == tomorrow(12)
    assert str(train["STATUS"]) == "CONFIRMED" and str(events["gone"]["STATUS"]) == "CANCELLED"
    assert "line one\nline two " + "x" * 100 in str(train["DESCRIPTION"])
    assert "node-1:0, node-1:1" in str(train["LOCATION"])
    assert all(len(line) <= 75 for line in response.content.split(b"\r\n"))


def test_renewing_the_token_retires_the_old_url(client, owner):
    old = feed_for(owner).token
    client.force_login(owner)
    client.post("/reservations/feed/renew/")
    client.logout()
    assert client.get(f"/reservations/feed/{old}.ics").status_code == 404
    assert client.get(f"/reservations/feed/{feed_for(owner).token}.ics").status_code == 200


def listed(client, query):
    response = client.get(f"/api/reservations/?{query}")
    assert response.status_code == 200, response.json()
    return sorted(r["title"] for r in response.json())


def test_the_api_filters_by_device_host_user_status_and_time(client, bookings, owner, gpus):
    client.force_login(owner)
    assert listed(client, f"device={gpus[3].pk}") == ["theirs"]
    assert listed(client, f"device={gpus[0].pk},{gpus[3].pk}") == ["Train; big, model", "theirs"]
    # A booking holding several of the named GPUs (or of the host's) comes once, and counts once.
    assert listed(client, f"device={gpus[0].pk},{gpus[1].pk}") == ["Train; big, model"]
    assert listed(client, "host=node-1") == ["Train; big, model", "gone", "theirs"]
    assert client.get("/api/reservations/?host=node-1")["X-Total-Count"] == "3"
    assert listed(client, f"host={gpus[0].host_id}&user=other") == ["theirs"]
    assert listed(client, "host=nowhere") == []
    assert listed(client, "status=cancelled") == ["gone"]
    start, end = tomorrow(11).isoformat(), tomorrow(13).isoformat()
    assert listed(client, f"start={start.replace('+', '%2B')}&end={end.replace('+', '%2B')}") == [
        "Train; big, model"
    ]


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("device=a", "device"),
        ("status=done", "status"),
        ("start=tomorrow", "start"),
        # Beyond what the database stores or a datetime holds: a 400, not an overflow.
        (f"device={10**22}", "device"),
        (f"host={10**22}", "host"),
        ("start=9999-12-31T23:59:59-14:00", "start"),
        ("end=0001-01-01T00:00:00%2B14:00", "end"),
    ],
)
def test_bad_filters_are_a_400_naming_the_field(client, owner, query, field):
    client.force_login(owner)
    response = client.get(f"/api/reservations/?{query}")
    assert response.status_code == 400
    assert field in response.json() and response.json()["detail"]


def test_gpus_and_a_time_range_filter_together(client, bookings, owner, gpus):
    """With ?device= or ?host=, the range narrows the GPUs' slots as well, whose index then
    answers without reading every booking the GPUs ever had (bench/api_reads.py 50000 150).
    The slots carry their booking's times, so the answers are the bookings' own."""
    client.force_login(owner)

    def between(start, end):
        return urlencode({"start": start.isoformat(), "end": end.isoformat()})

    both = f"device={gpus[0].pk},{gpus[3].pk}"
    early = between(tomorrow(9) + timedelta(minutes=30), tomorrow(10) + timedelta(minutes=30))
    late = between(tomorrow(10) + timedelta(minutes=30), tomorrow(12) + timedelta(minutes=30))
    assert listed(client, f"{both}&{early}") == ["Train; big, model", "theirs"]
    assert listed(client, f"{both}&{late}") == ["Train; big, model"]
    assert listed(client, f"host=node-1&{between(tomorrow(13), tomorrow(14))}") == ["gone"]
    assert listed(client, f"host={gpus[0].host_id}&{between(tomorrow(14), tomorrow(15))}") == []
    queryset = filter_reservations(
        Reservation.objects.all(),
        {"device": "1", "start": "2030-01-07T00:00Z", "end": "2030-01-14T00:00Z"},
    )
    sql = str(queryset.query)
    slots = re.search(r'FROM "reservations_reserveddevice" U0 WHERE \((.*?)\)\)', sql)
    assert slots and 'U0."end" >' in slots[1] and 'U0."start" <' in slots[1], sql
