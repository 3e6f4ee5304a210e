"""Every writing path waits its turn on SQLite (issue 36): a raw cursor's statement and a bulk
``executemany`` outside any transaction wait for another process's writer as transactions do,
instead of failing with "database is locked" once SQLite's busy_timeout runs out (the probing
loop's bulk update failed so under load). The busy timeout is cut to 50 ms, as in
tests/api/test_contention.py, so that what took minutes of load to show shows at once."""

import threading

import pytest
from django.db import connection
from django.utils import timezone

from core.sqlite3.base import DatabaseBusy
from monitoring.bulk import insert_many, update_many
from monitoring.models import Host, HostMetric
from tests.api.test_contention import other_writer

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's write lock"),
]


@pytest.fixture
def short_busy_timeout(db):
    """This connection waits 50 ms on SQLite's lock (not 20 s), then back to the setting."""
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA busy_timeout = 50")
    yield
    configured = int(connection.settings_dict["OPTIONS"]["timeout"] * 1000)
    with connection.cursor() as cursor:
        cursor.execute(f"PRAGMA busy_timeout = {configured}")


@pytest.fixture
def hosts(db):
    return [Host.objects.create(name=f"n{i}", address=f"10.0.0.{i + 1}") for i in range(3)]


def released_after(seconds: float):
    """Another process's write transaction, committed after ``seconds``."""
    holder = other_writer()
    timer = threading.Timer(seconds, lambda: holder.execute("COMMIT"))
    timer.start()
    return timer


def errors() -> set[str]:
    return set(Host.objects.values_list("last_error", flat=True))


def test_a_bulk_update_waits_for_another_processs_writer(short_busy_timeout, hosts, settings):
    settings.DATABASE_LOCK_WAIT = 10
    for host in hosts:
        host.last_error = "bulk"
    timer = released_after(0.5)
    update_many(hosts, ["last_error"])
    timer.join()
    assert errors() == {"bulk"}


def test_a_bulk_insert_and_a_raw_statement_wait_too(short_busy_timeout, hosts, settings):
    settings.DATABASE_LOCK_WAIT = 10
    timer = released_after(0.5)
    with connection.cursor() as cursor:
        cursor.execute("UPDATE monitoring_host SET last_error = %s", ["raw"])
    timer.join()
    timer = released_after(0.5)
    insert_many(
        HostMetric, [HostMetric(host=h, time=timezone.now(), cpu_utilization=1.0) for h in hosts]
    )
    timer.join()
    assert errors() == {"raw"} and HostMetric.objects.count() == 3


def test_a_bulk_write_kept_waiting_too_long_is_busy_and_changes_nothing(
    short_busy_timeout,
    hosts,
    settings,
):
    settings.DATABASE_LOCK_WAIT = 0.3
    for host in hosts:
        host.last_error = "late"
    holder = other_writer()
    try:
        with pytest.raises(DatabaseBusy):
            update_many(hosts, ["last_error"])
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert errors() == {""}
    update_many(hosts, ["last_error"])  # the writer was given back: the next write goes
    assert errors() == {"late"}
