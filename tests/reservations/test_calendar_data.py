"""The calendar feed and the overview: their content, and query counts that do not grow."""

from datetime import datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.utils import timezone

from accesscontrol import changes
from accesscontrol.models import Grant, Window
from accesscontrol.services import profile_for
from monitoring.models import Device, Host
from reservations.overview import FREE, MINE, OUTSIDE, TAKEN, overview_rows
from tests.reservations.test_booking import book, tomorrow


def feed(client, day, **extra):
    query = {"start": f"{day}T00:00", "end": f"{day + timedelta(days=7)}T00:00", **extra}
    response = client.get("/reservations/calendar/events/", query)
    assert response.status_code == 200, response.content
    return response.json()["events"]


def boxes(events):
    return [e for e in events if e.get("display") != "background"]


@pytest.fixture
def many_bookings(owner, other_user, gpus, everyone_may_book):
    def make(count):
        for i in range(count):
            user = owner if i % 2 else other_user
            start = tomorrow(0) + timedelta(hours=2 * i)
            book(user, gpus[i % 4 : i % 4 + 1], start, start + timedelta(hours=1), f"b{i}")

    return make


@pytest.mark.parametrize("count", [1, 12])
def test_the_feed_uses_a_constant_number_of_queries(
    client, owner, many_bookings, count, django_assert_num_queries
):
    many_bookings(count)
    client.force_login(owner)
    profile_for(owner)
    changes.forget()  # the bookings' checks kept some of the owner's access facts
    # session, user, zone, choice, devices, slots, bans (one query), grants and their windows
    # (a grant of all devices needs no hosts or GPUs read), the change token once
    with django_assert_num_queries(10):
        events = feed(client, tomorrow(0).date())
    assert len(boxes(events)) == count
    # Then the bans, grants and windows are kept while the token stays.
    with django_assert_num_queries(10 - 3):
        assert feed(client, tomorrow(0).date()) == events


def test_a_multi_gpu_booking_is_one_box_over_its_columns(client, owner, gpus, everyone_may_book):
    book(owner, gpus[:3], tomorrow(9), tomorrow(11), "wide")
    client.force_login(owner)
    (box,) = boxes(feed(client, tomorrow(0).date()))
    assert sorted(box["resourceIds"]) == sorted(str(g.pk) for g in gpus[:3])
    assert box["title"] == "owner: wide" and {"mine", "confirmed"} <= set(box["classNames"])


def test_times_are_in_the_users_own_zone(client, owner, gpus, everyone_may_book):
    profile = profile_for(owner)
    profile.time_zone = "Asia/Tokyo"
    profile.save()
    book(owner, gpus[:1], tomorrow(9), tomorrow(11))
    client.force_login(owner)
    day = tomorrow(9).astimezone(timezone.get_current_timezone()).date()
    (box,) = boxes(feed(client, day - timedelta(days=1)))
    tokyo = tomorrow(9).astimezone(ZoneInfo("Asia/Tokyo"))
    assert box["start"] == tokyo.replace(tzinfo=None).isoformat()


def test_only_permitted_windows_are_shaded(client, owner, gpus):
    grant = Grant.objects.create(name="mornings", scope=Grant.Scope.ALL)
    grant.users.add(owner)
    Window.objects.create(grant=grant, weekdays="0123456", start=time(8), end=time(12))
    client.force_login(owner)
    day = tomorrow(0).date()
    shaded = [e for e in feed(client, day, devices=str(gpus[0].pk)) if e.get("display")]
    assert len(shaded) == 7
    assert all(e["start"].endswith("T08:00:00") and e["end"].endswith("T12:00:00") for e in shaded)


def test_the_overview_paints_each_hour(owner, other_user, gpus, everyone_may_book):
    start = datetime.combine(tomorrow(0).date(), time(), tzinfo=timezone.get_current_timezone())
    book(owner, gpus[:1], start + timedelta(hours=2), start + timedelta(hours=4))
    book(other_user, gpus[:1], start + timedelta(hours=5, minutes=30), start + timedelta(hours=6))
    rows = overview_rows(owner, start, 1, list(Device.objects.filter(pk=gpus[0].pk)))
    assert rows[0].runs == [(FREE, 2), (MINE, 2), (FREE, 1), (TAKEN, 1), (FREE, 18)]


def test_the_overview_marks_hours_outside_the_windows(owner, gpus):
    grant = Grant.objects.create(name="mornings", scope=Grant.Scope.ALL)
    grant.users.add(owner)
    Window.objects.create(grant=grant, weekdays="0123456", start=time(8), end=time(12, 30))
    start = datetime.combine(tomorrow(0).date(), time(), tzinfo=timezone.get_current_timezone())
    (row,) = overview_rows(owner, start, 1, [gpus[0]])
    assert row.runs == [(OUTSIDE, 8), (FREE, 4), (OUTSIDE, 12)]


@pytest.mark.parametrize("hosts", [1, 6])
def test_the_overview_page_uses_a_constant_number_of_queries(
    client, owner, everyone_may_book, hosts, django_assert_num_queries
):
    for h in range(hosts):
        host = Host.objects.create(name=f"n{h}", address=f"10.1.0.{h}")
        devices = [Device.objects.create(host=host, index=i, uuid=f"G{h}-{i}") for i in range(8)]
        book(owner, devices[:2], tomorrow(9), tomorrow(10))
    client.force_login(owner)
    changes.forget()  # the bookings' checks kept some of the owner's access facts
    # The grant's hosts and GPUs are not read (all devices); the change token is, once; the
    # intruder notice every page carries (protection.context_processors) reads one.
    with django_assert_num_queries(13):
        response = client.get("/reservations/overview/")
    assert response.status_code == 200
    assert response.content.decode().count('class="ov-run mine"') == 2 * hosts
    with django_assert_num_queries(13 - 3):  # then bans, grants and windows are kept
        again = client.get("/reservations/overview/")
    assert again.content.decode().count('class="ov-run mine"') == 2 * hosts


def test_choosing_gpus_in_the_overview_narrows_the_calendar(client, owner, gpus):
    client.force_login(owner)
    chosen = [gpus[1].pk, gpus[3].pk]
    assert client.post("/reservations/overview/", {"devices": chosen}).status_code == 302
    page = client.get("/reservations/calendar/").content.decode()
    assert "node-1:1" in page and "node-1:3" in page and "node-1:0" not in page
