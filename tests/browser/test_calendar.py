"""The week calendar in a real Chromium: drag over 4 GPUs, book, see the box, clash, cancel."""

from datetime import datetime, time, timedelta

import pytest
from django.utils import timezone

from accesscontrol.services import ensure_default_group
from monitoring.models import Device, Host
from reservations.models import Reservation
from reservations.services import create_reservation


@pytest.fixture
def lab(db, owner, other_user):
    ensure_default_group()
    host = Host.objects.create(name="node-1", address="10.0.0.1")
    return [Device.objects.create(host=host, index=i, uuid=f"GPU-{i}") for i in range(4)]


def tomorrow():
    return timezone.localdate() + timedelta(days=1)


def at(hour):
    return datetime.combine(tomorrow(), time(hour), tzinfo=timezone.get_current_timezone())


def open_calendar(page, live_server):
    page.goto(f"{live_server.url}/reservations/calendar/?date={tomorrow().isoformat()}")
    page.wait_for_selector(".ec-body .ec-grid")
    page.wait_for_selector(".ec-bg-event.permitted")  # the feed has answered


def point(page, gpu_index, hour, minutes=15):
    """Viewport coordinates inside GPU ``gpu_index``'s column tomorrow at hour:minutes."""
    day = tomorrow()
    label = f"{day:%A}, {day.day} {day:%B %Y}, node-1:{gpu_index}"
    column = page.locator(f'.ec-col-head span[aria-label="{label}"]').locator("..")
    column_box, day_box = column.bounding_box(), page.locator(".ec-body .ec-grid").bounding_box()
    y = day_box["y"] + day_box["height"] * (hour + minutes / 60) / 24  # the grid is one day
    return column_box["x"] + column_box["width"] / 2, y


def drag(page, start, end):
    page.mouse.move(*start)
    page.mouse.down()
    page.mouse.move((start[0] + end[0]) / 2, (start[1] + end[1]) / 2, steps=5)
    page.mouse.move(*end, steps=5)
    page.mouse.up()


def test_a_newcomer_books_four_gpus_for_tomorrow_in_one_drag(login, lab, live_server):
    page = login("owner", "pw-owner-1")
    open_calendar(page, live_server)
    drag(page, point(page, 0, 9, 10), point(page, 3, 10, 50))
    dialog = page.locator("#book-dialog")
    dialog.wait_for(state="visible")
    ticked = dialog.locator("input[name=devices]:checked")
    assert ticked.count() == 4
    assert dialog.locator("input[name=start]").input_value() == f"{tomorrow()}T09:00"
    assert dialog.locator("input[name=end]").input_value() == f"{tomorrow()}T11:00"
    dialog.locator("input[name=title]").fill("Training run")
    dialog.locator("textarea[name=description]").fill("four GPUs")
    dialog.locator("#book-submit").click()
    dialog.wait_for(state="hidden")
    box = page.locator(".ec-event.booking.mine", has_text="owner: Training run")
    box.first.wait_for()
    reservation = Reservation.objects.get()
    assert reservation.owner.username == "owner" and reservation.devices.count() == 4
    assert (reservation.start, reservation.end) == (at(9), at(11))
    assert reservation.description == "four GPUs"


def test_booking_an_occupied_slot_shows_the_error_and_books_nothing(
    login, lab, live_server, other_user
):
    create_reservation(other_user, title="theirs", devices=lab[1:2], start=at(14), end=at(16))
    page = login("owner", "pw-owner-1")
    open_calendar(page, live_server)
    page.locator(".ec-event.booking.others", has_text="other: theirs").first.wait_for()
    # From a free GPU's column across into the booked one's (ending below its box).
    drag(page, point(page, 0, 15, 10), point(page, 1, 16, 50))
    dialog = page.locator("#book-dialog")
    dialog.wait_for(state="visible")
    assert dialog.locator("input[name=devices]:checked").count() == 2
    dialog.locator("input[name=title]").fill("mine")
    dialog.locator("#book-submit").click()
    error = dialog.locator("#book-error")
    error.wait_for(state="visible")
    assert "already reserved by other" in error.inner_text()
    assert Reservation.objects.count() == 1


def test_the_owner_cancels_from_the_details(login, lab, live_server, owner):
    reservation = create_reservation(
        owner, title="to cancel", devices=lab[:2], start=at(9), end=at(12)
    )
    page = login("owner", "pw-owner-1")
    open_calendar(page, live_server)
    page.locator(".ec-event.booking.mine", has_text="to cancel").first.click()
    details = page.locator("#detail-dialog")
    details.wait_for(state="visible")
    assert "node-1:0, node-1:1" in details.inner_text()
    page.once("dialog", lambda confirm: confirm.accept())
    details.locator("#detail-cancel").click()
    details.wait_for(state="hidden")
    page.locator(".ec-event.booking.cancelled", has_text="to cancel").first.wait_for()
    assert page.locator("#booking-status").inner_text() == "Cancelled 'to cancel'."
    reservation.refresh_from_db()
    assert reservation.status == Reservation.Status.CANCELLED


def test_others_see_details_without_cancel(login, lab, live_server, owner):
    create_reservation(owner, title="not yours", devices=lab[:1], start=at(9), end=at(12))
    page = login("other", "pw-other-1")
    open_calendar(page, live_server)
    page.locator(".ec-event.booking.others", has_text="not yours").first.click()
    details = page.locator("#detail-dialog")
    details.wait_for(state="visible")
    assert details.locator("#detail-cancel").is_hidden()


# The effective colours of an element: its text colour and the first opaque background up.
COLOURS = """el => {
  let node = el, bg = "rgba(0, 0, 0, 0)";
  while (node && (bg === "rgba(0, 0, 0, 0)" || bg === "transparent")) {
    bg = getComputedStyle(node).backgroundColor; node = node.parentElement;
  }
  return [getComputedStyle(el).color, bg, el.innerText.trim()];
}"""


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_day_and_gpu_heads_are_readable(login, lab, live_server, scheme):
    page = login("owner", "pw-owner-1")
    page.emulate_media(color_scheme=scheme)
    open_calendar(page, live_server)
    days, gpus = page.locator(".ec-header .ec-col-group"), page.locator(".ec-header .ec-col-head")
    assert days.count() == 7 and gpus.count() == 7 * 4
    for head in (days.first, days.nth(3), gpus.first, gpus.nth(5)):
        colour, background, text = head.evaluate(COLOURS)
        assert text and colour != background, (text, colour, background)


def test_the_midnight_hour_can_be_booked_by_a_drag(login, lab, live_server):
    page = login("owner", "pw-owner-1")
    open_calendar(page, live_server)
    page.locator(".ec-main").evaluate("main => { main.scrollTop = 0; }")  # it opens at 07:00
    drag(page, point(page, 0, 0, 5), point(page, 1, 0, 55))
    dialog = page.locator("#book-dialog")
    dialog.wait_for(state="visible")
    assert dialog.locator("input[name=start]").input_value() == f"{tomorrow()}T00:00"
    assert dialog.locator("input[name=end]").input_value() == f"{tomorrow()}T01:00"
    dialog.locator("input[name=title]").fill("night run")
    dialog.locator("#book-submit").click()
    dialog.wait_for(state="hidden")
    reservation = Reservation.objects.get()
    assert (reservation.start, reservation.end) == (at(0), at(1))


def test_booking_with_the_keyboard_form(login, lab, live_server):
    page = login("owner", "pw-owner-1")
    open_calendar(page, live_server)
    page.focus("#book-form-button")
    page.keyboard.press("Enter")
    dialog = page.locator("#book-dialog")
    dialog.wait_for(state="visible")
    page.keyboard.type("two for tomorrow")  # the title has the focus
    for gpu in lab[:2]:
        dialog.locator(f"input[name=devices][value='{gpu.pk}']").focus()
        page.keyboard.press("Space")
    # Tomorrow 09:00-17:00 is offered; keep it and send with Enter from the title.
    assert dialog.locator("input[name=start]").input_value() == f"{tomorrow()}T09:00"
    page.focus("#book-title")
    page.keyboard.press("Enter")
    dialog.wait_for(state="hidden")
    reservation = Reservation.objects.get()
    assert reservation.title == "two for tomorrow" and reservation.devices.count() == 2
    assert (reservation.start, reservation.end) == (at(9), at(17))
    # The page says what it did and its list of upcoming bookings follows, without a reload.
    status = page.locator("#booking-status")
    status.wait_for(state="visible")
    assert "Booked 'two for tomorrow': 2 GPUs" in status.inner_text()
    upcoming = page.locator("#my-upcoming", has_text="two for tomorrow")
    upcoming.wait_for()
