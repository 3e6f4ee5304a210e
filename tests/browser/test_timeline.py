"""The timeline (GPUs as rows grouped by host, time across) in a real Chromium: a drag over
three GPUs on two hosts books them, in a browser zone other than the user's, on the night the
clocks go back; the form books several GPUs; 800 GPUs open folded with only the rows in sight
drawn; axe finds nothing serious in light and dark."""

import re
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest

from accesscontrol.services import ensure_default_group, profile_for
from monitoring.models import Device, Host
from reservations.models import Reservation
from reservations.services import create_reservation
from tests.browser.test_calendar import drag
from tests.browser.test_calendar_zones import sign_in, zoned_page  # noqa: F401 - the fixture
from tests.browser.test_pages import AXE

BERLIN, NEW_YORK = "Europe/Berlin", "America/New_York"
CHANGE_DAY = date(2027, 10, 31)  # Berlin's clocks go back from 03:00 to 02:00
CLOCK = datetime(2027, 10, 30, 22, 30, tzinfo=UTC)  # Berlin's 31st, New York's 30th
SPRING_DAY = date(2027, 3, 28)  # Berlin's clocks go forward from 02:00 to 03:00


@pytest.fixture
def two_hosts(db, owner, other_user):
    ensure_default_group()
    hosts = [Host.objects.create(name=f"node-{n}", address=f"10.0.0.{n}") for n in (1, 2)]
    return {
        f"{h.name}:{i}": Device.objects.create(
            host=h, index=i, uuid=f"GPU-{h.name}-{i}", name="A100"
        )
        for h in hosts
        for i in range(4)
    }


def open_timeline(page, live_server, day, query=""):
    page.goto(f"{live_server.url}/reservations/timeline/?span=day&date={day}{query}")
    page.wait_for_selector(".tl-ok")  # the access feed has answered
    page.locator("#timeline").evaluate("t => { t.scrollLeft = 0; }")  # it opens at 07:00


def hours_into(day: date, hour: int, minutes: int = 0) -> float:
    """Real hours from ``day``'s midnight to hour:minutes (24: the next midnight) on Berlin's
    clock."""
    berlin = ZoneInfo(BERLIN)
    start = datetime.combine(day, time(0), tzinfo=berlin)
    at = datetime.combine(day + timedelta(days=hour // 24), time(hour % 24, minutes), berlin)
    return (at.astimezone(UTC) - start.astimezone(UTC)) / timedelta(hours=1)


def point(page, gpu, hour, minutes, day=CHANGE_DAY):
    """Viewport coordinates in ``gpu``'s row ("node-1:2") at hour:minutes of the day shown,
    on an axis where the day is as long as Berlin's clock makes it (25 hours on CHANGE_DAY)."""
    label = page.locator(".tl-label", has_text=re.compile(f"^{gpu}$"))
    row = page.locator(".tl-row").filter(has=label).bounding_box()
    box = page.locator(".tl-day").bounding_box()
    share = hours_into(day, hour, minutes) / hours_into(day, 24)
    return box["x"] + box["width"] * share, row["y"] + row["height"] / 2


def berlin_user_in_new_york(open_page, live_server, owner):
    """The owner, whose profile says Berlin, signed in from a browser in New York
    (``open_page``: the zoned_page fixture)."""
    profile = profile_for(owner)
    profile.time_zone = BERLIN
    profile.save()
    page = open_page(NEW_YORK, CLOCK)
    sign_in(page, live_server)
    return page


def book_in_dialog(page, title):
    dialog = page.locator("#book-dialog")
    dialog.locator("input[name=title]").fill(title)
    dialog.locator("#book-submit").click()
    dialog.wait_for(state="hidden")
    return Reservation.objects.get(title=title)


def test_a_drag_over_three_gpus_on_two_hosts_books_them_on_the_users_clock(
    zoned_page,  # noqa: F811 - the fixture imported above
    live_server,
    owner,
    two_hosts,
):
    page = berlin_user_in_new_york(zoned_page, live_server, owner)
    open_timeline(page, live_server, CHANGE_DAY)
    assert f"Times in {BERLIN}" in page.locator("h1 + span").inner_text()
    assert page.locator(".tl-toggle[aria-expanded=true]").count() == 2  # 8 GPUs: unfolded

    # 01:10 on node-1:2 to 03:50 on node-2:0, over the hour Berlin lives twice.
    drag(page, point(page, "node-1:2", 1, 10), point(page, "node-2:0", 3, 50))
    dialog = page.locator("#book-dialog")
    dialog.wait_for(state="visible")
    ticked = dialog.locator("input[name=devices]:checked")
    chosen = [two_hosts[g] for g in ("node-1:2", "node-1:3", "node-2:0")]
    assert sorted(int(ticked.nth(i).get_attribute("value")) for i in range(ticked.count())) == [
        d.pk for d in chosen
    ]
    assert dialog.locator("input[name=start]").input_value() == f"{CHANGE_DAY}T01:00"
    assert dialog.locator("input[name=end]").input_value() == f"{CHANGE_DAY}T04:00"
    booked = book_in_dialog(page, "dragged")
    berlin = ZoneInfo(BERLIN)
    assert booked.start == datetime.combine(CHANGE_DAY, time(1), tzinfo=berlin)
    assert booked.end == datetime.combine(CHANGE_DAY, time(4), tzinfo=berlin)
    assert booked.end - booked.start == timedelta(hours=4)  # 01:00 CEST to 04:00 CET
    assert set(booked.devices.all()) == set(chosen)

    # Its bar stands on each of the three rows, from 01:00 to 04:00 of the day shown, as wide
    # as the four hours it lasts on a day of 25, with "02" twice on the axis.
    bars = page.locator(".tl-bar.mine", has_text="dragged")
    bars.first.wait_for()
    assert bars.count() == 3
    day = page.locator(".tl-day").bounding_box()
    box = bars.first.bounding_box()
    hours = [
        round((x - day["x"]) / day["width"] * 25, 2) for x in (box["x"], box["x"] + box["width"])
    ]
    assert hours == [1, 5]
    ticks = page.locator(".tl-hour").all_inner_texts()
    assert ticks.count("02") == 2 and len(ticks) == 24  # 01 to 23, and 02 again
    bars.first.click()
    details = page.locator("#detail-dialog")
    details.wait_for(state="visible")
    assert f"{CHANGE_DAY} 01:00 – {CHANGE_DAY} 04:00 ({BERLIN})" in details.inner_text()


def test_the_spring_change_day_is_23_hours_long(
    zoned_page,  # noqa: F811 - the fixture imported above
    live_server,
    owner,
    two_hosts,
):
    """Berlin's clocks skip 02:00 to 03:00 on SPRING_DAY: the axis has no "02", and the day
    is 23 hours wide, so a booking is as wide as it lasts."""
    page = berlin_user_in_new_york(zoned_page, live_server, owner)
    open_timeline(page, live_server, SPRING_DAY)
    ticks = page.locator(".tl-hour").all_inner_texts()
    assert "02" not in ticks and len(ticks) == 22  # 01, then 03 to 23
    day = page.locator(".tl-day").bounding_box()
    hour = page.evaluate(
        "getComputedStyle(document.getElementById('timeline')).getPropertyValue('--hour')"
    )
    assert round(day["width"] / float(hour.removesuffix("px"))) == 23


def test_the_form_books_several_gpus(login, live_server, two_hosts):
    page = login("owner", "pw-owner-1")
    open_timeline(page, live_server, date.today())
    page.focus("#book-form-button")
    page.keyboard.press("Enter")
    dialog = page.locator("#book-dialog")
    dialog.wait_for(state="visible")
    page.keyboard.type("from the form")  # the title has the focus
    for gpu in ("node-1:0", "node-2:3"):
        dialog.locator(f"input[name=devices][value='{two_hosts[gpu].pk}']").check()
    dialog.locator("input[name=start]").fill("2031-05-06T09:00")
    dialog.locator("input[name=end]").fill("2031-05-06T17:30")
    booked = book_in_dialog(page, "from the form")
    assert set(booked.devices.all()) == {two_hosts["node-1:0"], two_hosts["node-2:3"]}
    assert booked.end - booked.start == timedelta(hours=8, minutes=30)


@pytest.fixture
def big_lab(db, owner):
    ensure_default_group()
    hosts = Host.objects.bulk_create(
        Host(name=f"rack-{n:03}", address=f"10.1.{n // 200}.{n % 200}") for n in range(100)
    )
    Device.objects.bulk_create(
        Device(host=h, index=i, uuid=f"GPU-{h.pk}-{i}", name="H100" if h.pk % 2 else "A100")
        for h in hosts
        for i in range(8)
    )
    return hosts


def test_800_gpus_open_folded_and_draw_only_the_rows_in_sight(login, live_server, big_lab):
    page = login("owner", "pw-owner-1")
    page.goto(f"{live_server.url}/reservations/timeline/")
    page.wait_for_selector("#timeline[aria-busy=false]")
    assert page.locator(".tl-toggle[aria-expanded=true]").count() == 0
    drawn = page.locator(".tl-row").count()
    assert 10 < drawn < 60
    assert page.evaluate("document.getElementsByTagName('*').length") < 1500
    page.click("#tl-expand")  # 900 rows now: still only those in sight
    assert page.locator(".tl-row").count() < 60
    timeline = page.locator("#timeline")
    timeline.evaluate("t => { t.scrollTop = t.scrollHeight; }")
    page.locator(".tl-label", has_text=re.compile("^rack-099:7$")).wait_for()
    page.click("#tl-collapse")
    page.fill("#tl-host", "rack-04")  # ten hosts; one unfolded shows its eight GPUs
    assert page.locator(".tl-toggle").count() == 10
    page.click(".tl-toggle[data-host=rack-042]")
    assert page.locator(".tl-row:not(.tl-host-row)").count() == 8
    page.select_option("#tl-model", "H100")  # half of those hosts
    assert page.locator(".tl-toggle").count() == 5


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_timeline_is_clean_for_axe(login, live_server, two_hosts, owner, other_user, scheme):
    tomorrow = date.today() + timedelta(days=1)
    for user, gpu, hour in ((owner, "node-1:0", 9), (other_user, "node-2:1", 13)):
        start = datetime.combine(tomorrow, time(hour), tzinfo=UTC)
        create_reservation(
            user, title="run", devices=[two_hosts[gpu]], start=start, end=start + timedelta(hours=3)
        )
    page = login("owner", "pw-owner-1")
    page.emulate_media(color_scheme=scheme)
    page.goto(f"{live_server.url}/reservations/timeline/?date={tomorrow}")
    page.wait_for_selector(".tl-bar.others")
    page.screenshot(path=f"/tmp/tl39/timeline-{scheme}.png")
    page.add_script_tag(path=str(AXE))
    violations = page.evaluate(
        """async () => (await axe.run(document, {resultTypes: ["violations"]})).violations
            .filter(v => v.impact === "serious" || v.impact === "critical")
            .map(v => v.id + ": " + v.nodes.slice(0, 3).map(n => n.target.join(" ")).join(", "))"""
    )
    assert violations == []
