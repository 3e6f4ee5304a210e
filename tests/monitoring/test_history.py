"""Metric history: minute and hour averages, retention, and the scheduled task's record."""

from datetime import UTC, datetime, timedelta

import pytest

from core.models import Activity
from monitoring.history import RETENTION_ACTIVITY, downsample, prune, run_retention
from monitoring.models import Device, GpuMetric, Host, HostMetric, Resolution

T0 = datetime(2026, 3, 1, 10, 0, tzinfo=UTC)


@pytest.fixture
def device(db):
    host = Host.objects.create(name="n1", address="10.0.0.1")
    return Device.objects.create(host=host, index=0, uuid="GPU-1", name="T4")


def raw(device, seconds, util, power=None):
    return GpuMetric.objects.create(
        device=device, time=T0 + timedelta(seconds=seconds), utilization_gpu=util, power_w=power
    )


def averages(step):
    rows = GpuMetric.objects.filter(step=step).order_by("time")
    return [(r.time, r.utilization_gpu, r.power_w) for r in rows]


def test_it_averages_each_finished_minute(device):
    raw(device, 0, 10, 100.0)
    raw(device, 30, 20, None)  # a GPU that cannot report power: ignored, not counted as 0
    raw(device, 59, 30, 50.0)
    raw(device, 60, 90)
    raw(device, 125, 5)  # the minute still running at "now" is left for later
    downsample(now=T0 + timedelta(seconds=180))
    assert averages(Resolution.MINUTE) == [
        (T0, 20.0, 75.0),
        (T0 + timedelta(minutes=1), 90.0, None),
    ]


def test_it_is_idempotent_and_resumes_where_it_stopped(device):
    raw(device, 0, 10)
    downsample(now=T0 + timedelta(minutes=2))
    downsample(now=T0 + timedelta(minutes=2))
    assert len(averages(Resolution.MINUTE)) == 1
    raw(device, 61, 40)
    raw(device, 3 * 3600, 70)  # after a long pause: the empty hours are skipped
    downsample(now=T0 + timedelta(hours=3, minutes=5))
    minutes = averages(Resolution.MINUTE)
    assert [(t - T0, u) for t, u, _ in minutes] == [
        (timedelta(0), 10.0),
        (timedelta(minutes=1), 40.0),
        (timedelta(hours=3), 70.0),
    ]


def test_hours_average_the_minute_averages(device):
    for minute in range(60):
        raw(device, minute * 60, minute)  # 0..59, mean 29.5
    raw(device, 3600, 100)
    downsample(now=T0 + timedelta(hours=2, minutes=1))
    assert averages(Resolution.HOUR) == [
        (T0, 29.5, None),
        (T0 + timedelta(hours=1), 100.0, None),
    ]


def test_the_current_hour_is_not_averaged_yet(device):
    raw(device, 0, 10)
    downsample(now=T0 + timedelta(minutes=50))
    assert averages(Resolution.MINUTE) and not averages(Resolution.HOUR)


def test_host_metrics_are_averaged_per_host(device):
    other = Host.objects.create(name="n2", address="10.0.0.2")
    for host, values in ((device.host, (10, 30)), (other, (50, 50))):
        for second, value in zip((0, 30), values, strict=True):
            HostMetric.objects.create(
                host=host, time=T0 + timedelta(seconds=second), cpu_utilization=value
            )
    downsample(now=T0 + timedelta(minutes=2))
    rows = HostMetric.objects.filter(step=Resolution.MINUTE).order_by("host__name")
    assert [(r.host.name, r.cpu_utilization) for r in rows] == [("n1", 20.0), ("n2", 50.0)]


def test_prune_keeps_each_tier_for_its_retention(device, settings):
    settings.MONITORING_RAW_RETENTION_HOURS = 24
    settings.MONITORING_MINUTE_RETENTION_DAYS = 30
    settings.MONITORING_HOUR_RETENTION_DAYS = 400
    now = T0
    ages = {
        Resolution.RAW: [timedelta(hours=23), timedelta(hours=25)],
        Resolution.MINUTE: [timedelta(days=29), timedelta(days=31)],
        Resolution.HOUR: [timedelta(days=399), timedelta(days=401)],
    }
    for step, (kept, gone) in ages.items():
        GpuMetric.objects.create(device=device, step=step, time=now - kept, utilization_gpu=1)
        GpuMetric.objects.create(device=device, step=step, time=now - gone, utilization_gpu=2)
    assert prune(now=now) == 3
    assert set(GpuMetric.objects.values_list("utilization_gpu", flat=True)) == {1}


def test_the_scheduled_task_records_what_it_did(device):
    raw(device, 0, 10)
    summary = run_retention()
    activity = Activity.objects.get(name=RETENTION_ACTIVITY)
    assert activity.last_summary == summary
    assert summary.startswith("2 averages added")  # a minute and an hour
    assert activity.last_success_at is not None and activity.last_error == ""


def test_a_failing_cleanup_is_recorded_for_the_admin(device, settings):
    settings.MONITORING_RAW_RETENTION_HOURS = "a day"
    with pytest.raises(TypeError):
        run_retention()
    activity = Activity.objects.get(name=RETENTION_ACTIVITY)
    assert activity.last_error.startswith("TypeError") and activity.last_error_at
