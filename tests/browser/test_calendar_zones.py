"""The calendar in browsers set to other zones than the user's profile, in weeks with a DST
change: a drag and the form book the hours chosen on the user's clock, the shading covers
the days shown, and the today column is the user's today (the browser's clock is set to a
moment when the two zones' dates differ); a booking's details read and edit the same hours.

Each case is one browser session: the checks share its page to keep the suite short.
"""

from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest

from accesscontrol.services import profile_for
from reservations.models import Reservation
from tests.browser.conftest import keep_screenshot_if_failed
from tests.browser.test_calendar import drag, lab  # noqa: F401 - the fixture


def case(browser_zone, profile, clock, change_day, night_hours, name):
    """The browser's zone, the profile's, the browser's clock (UTC), the Sunday of the week's
    DST change in the profile's zone, and the real hours from 22:00 before it to 06:00."""
    when = datetime.fromisoformat(clock).replace(tzinfo=UTC)
    day = date.fromisoformat(change_day)
    return pytest.param(browser_zone, profile, when, day, night_hours, id=name)


BERLIN, NEW_YORK = "Europe/Berlin", "America/New_York"
CASES = [
    case("UTC", BERLIN, "2027-03-27T23:30", "2027-03-28", 7, "utc-berlin-spring"),
    case(BERLIN, NEW_YORK, "2027-03-14T03:30", "2027-03-14", 7, "berlin-ny-spring"),
    case(NEW_YORK, BERLIN, "2027-10-30T22:30", "2027-10-31", 9, "ny-berlin-autumn"),
    # The same zone on both sides was shifted too (the helper read local dates as UTC); no
    # DST change that week.
    case(NEW_YORK, NEW_YORK, "2027-06-15T02:30", "2027-06-20", 8, "ny-both"),
]


@pytest.fixture
def zoned_page(chromium, request):
    """zoned_page(zone, clock): a page whose browser lives in ``zone`` at ``clock``."""
    contexts = []

    def open_page(zone, clock):
        context = chromium.new_context(
            viewport={"width": 1400, "height": 900}, locale="en-GB", timezone_id=zone
        )
        context.set_default_timeout(10_000)
        contexts.append(context)
        page = context.new_page()
        page.clock.set_fixed_time(clock)
        return page

    yield open_page
    for context in contexts:
        keep_screenshot_if_failed(request.node, context.pages[0])
        context.close()


def sign_in(page, live_server):
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("input[name=username]", "owner")
    page.fill("input[name=password]", "pw-owner-1")
    page.click("[type=submit]")
    page.wait_for_load_state()
    assert "/accounts/login/" not in page.url, "login failed"


def column(page, day, gpu_index):
    label = f"{day:%A}, {day.day} {day:%B %Y}, node-1:{gpu_index}"
    return page.locator(f'.ec-col-head span[aria-label="{label}"]').locator("..")


def point(page, day, gpu_index, hour, minutes):
    """Viewport coordinates in GPU ``gpu_index``'s column on ``day`` at hour:minutes."""
    box, grid = column(page, day, gpu_index).bounding_box(), grid_box(page)
    return box["x"] + box["width"] / 2, grid["y"] + grid["height"] * (hour + minutes / 60) / 24


def grid_box(page):
    return page.locator(".ec-body .ec-grid").bounding_box()  # one day, top to bottom


def hours_of(page, box):
    """The wall-clock hours a box spans on the grid, as (from, to)."""
    grid = grid_box(page)
    top = (box["y"] - grid["y"]) / grid["height"] * 24
    return round(top, 2), round(top + box["height"] / grid["height"] * 24, 2)


def book_in_dialog(page, title, gpu, start=None, end=None):
    dialog = page.locator("#book-dialog")
    dialog.wait_for(state="visible")
    dialog.locator("input[name=title]").fill(title)
    if gpu is not None:
        dialog.locator(f"input[name=devices][value='{gpu.pk}']").check()
    if start:
        dialog.locator("input[name=start]").fill(start)
        dialog.locator("input[name=end]").fill(end)
    dialog.locator("#book-submit").click()
    dialog.wait_for(state="hidden")
    return Reservation.objects.get(title=title)


def check_today_and_shading(page, user_today):
    """The one today column is the user's date; every day shown is shaded whole (the grant
    covers all time), so the feed was asked for the user's week, not a shifted one."""
    days = page.locator(".ec-col-group.ec-today")
    assert days.count() == 1
    head = page.locator(".ec-col-head.ec-today span[aria-label]").first
    assert head.get_attribute("aria-label").startswith(
        f"{user_today:%A}, {user_today.day} {user_today:%B %Y},"
    )
    shading = page.locator(".ec-bg-event.permitted")
    assert shading.count() == 7 * 4
    for i in range(shading.count()):
        assert hours_of(page, shading.nth(i).bounding_box()) == (0, 24)


# The wall clock hiveTime gives for an instant, as text and as a chart's Date (its local
# fields: uPlot's tzDate).
WALL = """seconds => {
  const d = hiveTime.wallDate(seconds), pad = (n) => String(n).padStart(2, "0");
  const local = `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T` +
    `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
  return [hiveTime.wall(seconds * 1000), local];
}"""


def check_conversions(page, profile, change_day):
    """hiveTime's wall clock through the change night, as zoneinfo reads it."""
    night = datetime.combine(change_day, time(0), tzinfo=ZoneInfo(profile))
    for hours in range(0, 8):
        instant = (night + timedelta(hours=hours)).astimezone(UTC)
        expected = instant.astimezone(ZoneInfo(profile)).strftime("%Y-%m-%dT%H:%M:%S")
        assert page.evaluate(WALL, instant.timestamp()) == [expected, expected]


@pytest.mark.parametrize(("browser_zone", "profile", "clock", "change_day", "night_hours"), CASES)
def test_bookings_are_the_hours_chosen_on_the_users_clock(
    zoned_page,
    live_server,
    owner,
    browser_zone,
    profile,
    clock,
    change_day,
    night_hours,
    lab,  # noqa: F811 - the fixture imported above
):
    zone = ZoneInfo(profile)
    profile_row = profile_for(owner)
    profile_row.time_zone = profile
    profile_row.save()
    user_today = clock.astimezone(zone).date()
    if browser_zone != profile:  # the case is only worth its time if the dates differ
        assert user_today != clock.astimezone(ZoneInfo(browser_zone)).date()
    page = zoned_page(browser_zone, clock)
    sign_in(page, live_server)
    page.goto(f"{live_server.url}/reservations/calendar/")  # opens on the user's week
    page.wait_for_selector(".ec-bg-event.permitted")
    assert f"Times in {profile}" in page.locator("h1 + span").inner_text()
    check_today_and_shading(page, user_today)
    check_conversions(page, profile, change_day)

    def at(day, hour):
        return datetime.combine(day, time(hour), tzinfo=zone)

    # A drag over two GPUs on the change day, 09:00-11:00 on the user's clock.
    drag(page, point(page, change_day, 0, 9, 10), point(page, change_day, 1, 10, 50))
    dialog = page.locator("#book-dialog")
    dialog.wait_for(state="visible")
    assert dialog.locator("input[name=start]").input_value() == f"{change_day}T09:00"
    assert dialog.locator("input[name=end]").input_value() == f"{change_day}T11:00"
    dragged = book_in_dialog(page, "dragged", None)
    assert (dragged.start, dragged.end) == (at(change_day, 9), at(change_day, 11))
    box = page.locator(".ec-event.booking.mine", has_text="dragged").first
    box.wait_for()
    assert hours_of(page, box.bounding_box()) == (9, 11)

    # The form offers the user's tomorrow, 09:00-17:00.
    tomorrow = user_today + timedelta(days=1)
    page.click("#book-form-button")
    assert dialog.locator("input[name=start]").input_value() == f"{tomorrow}T09:00"
    offered = book_in_dialog(page, "offered", lab[2])
    assert (offered.start, offered.end) == (at(tomorrow, 9), at(tomorrow, 17))

    # Hours typed in the form, over the change night: 22:00 to 06:00 on the user's clock.
    eve = change_day - timedelta(days=1)
    page.click("#book-form-button")
    typed = book_in_dialog(page, "typed", lab[3], f"{eve}T22:00", f"{change_day}T06:00")
    assert (typed.start, typed.end) == (at(eve, 22), at(change_day, 6))
    assert typed.end - typed.start == timedelta(hours=night_hours)

    # Its details read the same hours, and moving its end books the hour typed.
    page.locator(".ec-event.booking.mine", has_text="typed").first.click()
    details = page.locator("#detail-dialog")
    details.wait_for(state="visible")
    assert f"{eve} 22:00 – {change_day} 06:00 ({profile})" in details.inner_text()
    assert details.locator("input[name=end]").input_value() == f"{change_day}T06:00"
    details.locator("input[name=end]").fill(f"{change_day}T07:00")
    details.locator("#detail-save").click()
    details.wait_for(state="hidden")
    typed.refresh_from_db()
    assert (typed.start, typed.end) == (at(eve, 22), at(change_day, 7))
