"""The calendar's data (from the API) and the overview: their content, and query counts that
do not grow."""

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


def week(day):
    start = datetime.combine(day, time(), tzinfo=timezone.get_current_timezone())
    return {"start": start.isoformat(), "end": (start + timedelta(days=7)).isoformat()}


def bookings(client, day, devices):
    """The calendar's boxes: the week's bookings of the GPUs shown, from the list."""
    query = {**week(day), "device": ",".join(str(d.pk) for d in devices)}
    response = client.get("/api/reservations/", query)
    assert response.status_code == 200, response.content
    return response.json()


def shading(client, day, devices):
    """Where the calendar shades: the reader's access to the GPUs shown, from /api/access/."""
    query = {**week(day), "device": ",".join(str(d.pk) for d in devices)}
    response = client.get("/api/access/", query)
    assert response.status_code == 200, response.content
    return {d["id"]: d["covered"] for d in response.json()["devices"]}


@pytest.fixture
def many_bookings(owner, other_user, gpus, everyone_may_book):
    def make(count):
        for i in range(count):
            user = owner if i % 2 else other_user
            start = tomorrow(0) + timedelta(hours=2 * i)
            book(user, gpus[i % 4 : i % 4 + 1], start, start + timedelta(hours=1), f"b{i}")

    return make


@pytest.mark.parametrize("count", [1, 12])
def test_the_week_uses_a_constant_number_of_queries(
    client,
    owner,
    gpus,
    many_bookings,
    count,
    django_assert_num_queries,
    django_assert_max_num_queries,
):
    many_bookings(count)
    client.force_login(owner)
    profile_for(owner)
    changes.forget()  # the bookings' checks kept some of the owner's access facts
    day = tomorrow(0).date()
    # session, user, zone, the bookings' page, their GPUs (at most: the list's own fast path)
    with django_assert_max_num_queries(5):
        assert len(bookings(client, day, gpus)) == count
    # session, user, zone, the GPUs named (checked, then read with their hosts), bans (one
    # query), grants and their windows (a grant of all devices needs no hosts or GPUs read),
    # the change token once
    with django_assert_num_queries(10):
        covered = shading(client, day, gpus)
    assert all(len(spans) == 1 for spans in covered.values())
    # Then the bans, grants and windows are kept while the token stays.
    with django_assert_num_queries(10 - 3):
        assert shading(client, day, gpus) == covered


def test_a_multi_gpu_booking_names_its_gpus(client, owner, gpus, everyone_may_book):
    book(owner, gpus[:3], tomorrow(9), tomorrow(11), "wide")
    client.force_login(owner)
    (row,) = bookings(client, tomorrow(0).date(), gpus[1:2])
    assert row["devices"] == [g.pk for g in gpus[:3]] and row["owner"] == "owner"


def test_times_are_instants_in_the_users_own_zone(client, owner, gpus, everyone_may_book):
    profile = profile_for(owner)
    profile.time_zone = "Asia/Tokyo"
    profile.save()
    book(owner, gpus[:1], tomorrow(9), tomorrow(11))
    client.force_login(owner)
    day = tomorrow(9).astimezone(timezone.get_current_timezone()).date()
    (row,) = bookings(client, day - timedelta(days=1), gpus)
    assert row["start"] == tomorrow(9).astimezone(ZoneInfo("Asia/Tokyo")).isoformat()


def test_only_permitted_windows_are_shaded(client, owner, gpus):
    grant = Grant.objects.create(name="mornings", scope=Grant.Scope.ALL)
    grant.users.add(owner)
    Window.objects.create(grant=grant, weekdays="0123456", start=time(8), end=time(12))
    client.force_login(owner)
    covered = shading(client, tomorrow(0).date(), gpus[:1])[gpus[0].pk]
    assert len(covered) == 7
    zone = timezone.get_current_timezone()
    for span in covered:
        start, end = (datetime.fromisoformat(span[k]).astimezone(zone) for k in ("start", "end"))
        assert (start.time(), end.time()) == (time(8), time(12))


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
