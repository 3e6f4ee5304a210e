"""/metrics: per-user usage counters, summed from the daily rows."""

import pytest

from accounting import rollup
from tests.monitoring.test_metrics import TOKEN, samples, scrape

from .conftest import DAY, NOW


def test_per_user_counters(client, history, settings):
    settings.METRICS_TOKEN = TOKEN
    rollup.compute_day(DAY, NOW)
    rollup.compute_day(DAY.replace(day=11), NOW)
    got = samples(scrape(client))
    owner = frozenset({"user": "owner"}.items())
    assert got[("hive_user_gpu_reserved_hours_total", owner)] == 4.0
    assert got[("hive_user_gpu_used_hours_total", owner)] == 1.0
    assert got[("hive_user_gpu_idle_hours_total", owner)] == 1.0
    assert got[("hive_user_gpu_energy_kwh_total", owner)] == pytest.approx(0.25)
    other = frozenset({"user": "other"}.items())
    assert got[("hive_user_gpu_used_hours_total", other)] == 0.5
    assert got[("hive_user_gpu_unbooked_hours_total", other)] == 1.5
    assert got[("hive_user_gpu_idle_hours_total", other)] == 0
    assert not [key for key in got if key[0].startswith("hive_user") and not key[1]]
