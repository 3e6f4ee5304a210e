"""Usage figures from the monitoring history; reminders and idle warnings told once, by mail
over SMTP unless the owner chose otherwise."""

from datetime import timedelta

import pytest
from django.utils import timezone

from monitoring.models import GpuMetric, Resolution
from notifications.models import Channel, Delivery
from notifications.send import send_due
from reservations import notifications, schedules
from reservations.models import Reservation, ReservedDevice
from reservations.usage import finalise_ended, usage_of
from tests.notifications.conftest import receiver  # noqa: F401 (fixture)
from tests.reservations.test_booking import book, tomorrow

MINUTE = timedelta(minutes=1)


def move(reservation, start, end):
    """Put a booking in the past or present (the rules refuse to create one there)."""
    Reservation.objects.filter(pk=reservation.pk).update(start=start, end=end)
    ReservedDevice.objects.filter(reservation=reservation).update(start=start, end=end)
    reservation.refresh_from_db()
    return reservation


def samples(device, start, minutes, utilization, memory=1000.0, step=Resolution.RAW):
    spacing = timedelta(seconds=10) if step == Resolution.RAW else timedelta(seconds=step)
    count = int(minutes * 60 / spacing.total_seconds())
    GpuMetric.objects.bulk_create(
        GpuMetric(
            device=device,
            step=step,
            time=start + i * spacing,
            utilization_gpu=utilization,
            utilization_memory=3.0,
            memory_used_mib=memory,
        )
        for i in range(count)
    )


@pytest.fixture
def running(owner, gpus, everyone_may_book, settings):
    settings.MONITORING_HISTORY_STEP = 10
    now = timezone.now()
    return move(
        book(owner, gpus[:2], tomorrow(9), tomorrow(12)), now - 90 * MINUTE, now + 30 * MINUTE
    )


def test_live_usage_averages_the_samples_so_far(running, gpus):
    start = running.start
    samples(gpus[0], start, 60, 80.0, memory=4000.0)
    samples(gpus[1], start, 60, 0.0, memory=1000.0)
    usage = usage_of(running)
    assert usage.utilization == 40.0 and usage.memory_mib == 2500
    assert usage.idle_minutes == 60.0 and usage.busy_minutes == 60.0 and not usage.final


def test_averaged_history_fills_in_where_raw_samples_were_pruned(running, gpus):
    samples(gpus[0], running.start, 30, 100.0, step=Resolution.MINUTE)
    samples(gpus[0], running.start + 30 * MINUTE, 30, 0.0)
    usage = usage_of(running)
    assert usage.utilization == 50.0 and usage.idle_minutes == 30.0


def test_final_figures_are_stored_when_it_ends(running, gpus):
    samples(gpus[0], running.start, 60, 50.0)
    move(running, running.start, timezone.now() - MINUTE)
    assert "1 ended" in schedules.run_finalise_usage()
    running.refresh_from_db()
    assert running.usage_final and running.used_utilization == 50.0
    GpuMetric.objects.all().delete()  # history pruned later: the stored figures stay
    assert usage_of(running).utilization == 50.0 and usage_of(running).final
    assert finalise_ended() == 0


def test_a_future_booking_has_no_usage(owner, gpus, everyone_may_book):
    assert usage_of(book(owner, gpus[:1], tomorrow(9), tomorrow(10))) is None


def test_my_reservations_page_shows_the_figures(client, running, gpus, owner):
    samples(gpus[0], running.start, 60, 80.0, memory=4000.0)
    client.force_login(owner)
    page = client.get("/reservations/mine/").content.decode()
    assert "80.0" in page and "4000" in page and "so far" in page


def test_the_usage_summary_counts_booked_and_used_gpu_hours(client, running, gpus, admin_user):
    samples(gpus[0], running.start, 60, 50.0)
    move(running, running.start, running.start + 60 * MINUTE)
    finalise_ended()
    client.force_login(admin_user)
    day = (running.start - timedelta(days=1)).date()
    page = client.get(f"/reservations/usage/?start={day}&days=3").content.decode()
    assert "<td>owner</td><td>1</td><td>2.0</td><td>1.0</td><td>50</td>" in page
    assert "<td>everyone</td>" in page


def test_a_booking_crossing_the_period_edge_counts_its_share_of_use(running, gpus):
    from reservations.stats import summary

    samples(gpus[0], running.start, 60, 50.0)
    move(running, running.start, running.start + 60 * MINUTE)
    finalise_ended()
    # The period holds the booking's last 15 minutes: a quarter of it, a quarter of its use.
    users, _ = summary(running.start + 45 * MINUTE, running.start + 120 * MINUTE)
    (line,) = users
    whole = summary(running.start - MINUTE, running.end + MINUTE)[0][0]
    assert line.booked_hours == pytest.approx(whole.booked_hours / 4)
    assert line.used_hours == pytest.approx(whole.used_hours / 4)
    assert line.used_hours <= line.booked_hours


# --- notices (mail by default, through the notifications app) ------------------------------


def test_start_reminder_is_told_once(owner, gpus, everyone_may_book, settings, smtp):
    settings.RESERVATION_REMIND_START_MINUTES = 30
    soon = timezone.now() + 20 * MINUTE
    book(owner, gpus[:1], soon, soon + timedelta(hours=1), title="soon")
    book(owner, gpus[1:2], soon + timedelta(hours=2), soon + timedelta(hours=3), title="later")
    assert notifications.send_due()["starts"] == 1
    assert notifications.send_due()["starts"] == 0
    assert send_due() == 1  # as the notifications sender does
    assert smtp.to() == [["owner@example.org"]]
    assert "Subject: Your reservation 'soon' starts soon" in smtp.text()


def test_end_reminder_and_idle_warning(running, gpus, settings, smtp):
    settings.RESERVATION_REMIND_END_MINUTES = 45
    settings.RESERVATION_IDLE_MINUTES = 60
    now = timezone.now()
    samples(gpus[0], now - 61 * MINUTE, 61, 0.0)  # idle for the whole hour
    samples(gpus[1], now - 61 * MINUTE, 61, 0.0)
    GpuMetric.objects.create(device=gpus[1], time=now - 5 * MINUTE, utilization_gpu=90.0)
    sent = schedules.run_notifications()
    assert sent == "0 starts, 1 ends, 1 idle notice(s) told"
    assert schedules.run_notifications() == "0 starts, 0 ends, 0 idle notice(s) told"
    assert send_due() == 2
    assert {d.subject for d in Delivery.objects.all()} == {
        "Your reservation 'run' ends soon",
        f"Reserved GPU {gpus[0].host.name}:0 is idle",
    }
    assert len(smtp.messages) == 2 and send_due() == 0


def test_an_owner_who_chose_chat_for_reminders_gets_no_mail(
    running,
    settings,
    smtp,
    receiver,  # noqa: F811
):
    settings.RESERVATION_REMIND_END_MINUTES = 45
    Channel.objects.create(user=running.owner, kind="email", events=["booking_starts"])
    Channel.objects.create(user=running.owner, kind="slack", target=receiver.url)
    assert notifications.send_due()["ends"] == 1
    assert send_due() == 1
    assert smtp.messages == [] and len(receiver.received) == 1
    assert "'run' ends" in receiver.received[0][1]["text"]


def test_schedules_are_registered_once(db):
    from django_q.models import Schedule

    from monitoring.management.commands.serve import ensure_app_schedules

    ensure_app_schedules()
    ensure_app_schedules()
    names = set(Schedule.objects.values_list("name", flat=True))
    assert set(schedules.SCHEDULES) <= names
    assert Schedule.objects.filter(name__in=schedules.SCHEDULES).count() == 2
