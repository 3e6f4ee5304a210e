"""Shared fixtures (personas for permission tests, an isolated data directory) and the
selection of the tests that depend on the database profile.

CI runs the suite twice (``.ci/run``): all of it on the embedded profile (SQLite, ORM broker,
in-memory channel layer), then, with ``HIVE_TESTS=profile``, only the tests marked
``profile`` on PostgreSQL and Redis: what behaves differently there (the database, the broker
and the channel layer, faults, races, browsers) and a smoke test of each app. The others
test logic that does not touch what the profile changes, so a second run would repeat them.
"""

import os
from copy import deepcopy

import pytest
from django.conf import settings as django_settings
from django.contrib.auth import get_user_model
from django.core.cache import cache

from tests import leftovers
from tests.mailbox import smtp  # noqa: F401 (the fixture, for every test that mails)

# Test files that depend on the profile, besides those marked `profile` in their own module.
# A directory covers every file under it.
PROFILE_PATHS = (
    "tests/test_profiles.py",  # which database, broker and channel layer are used
    "tests/faults/",  # a database, a broker or a worker going away
    "tests/browser/",  # a web process apart from the test process, on one database
    "tests/audit/",
    "tests/reservations/",  # double bookings refused by the database (an exclusion constraint)
    "tests/monitoring/test_loop.py",  # the lease, taken and renewed under races
    "tests/monitoring/test_history.py",  # bulk inserts, averaging and retention in SQL
    "tests/monitoring/test_live.py",  # the channel layer (Redis)
    "tests/security/test_web_processes.py",  # web processes sharing sessions and Redis groups
    "tests/monitoring/test_restart.py",
    "tests/monitoring/test_ssh_probe.py",  # smoke: monitoring against the real sshd
    "tests/monitoring/test_healthz.py",  # the database and the broker (Redis) answering
    "tests/monitoring/test_probe_session.py",  # faults: remote loop killed, reboot, drop
    "tests/monitoring/test_steady_recording.py",  # executemany with each backend's values
    "tests/queueing/test_runs.py",  # GPU claims unique in the database, gang start
    "tests/queueing/test_dispatch.py",  # rounds handed to the broker
    "tests/jobs/test_sync.py",  # a stop landing during a sync, decided in SQL
    "tests/jobs/test_execution.py",  # smoke: jobs through sshd and screen
    "tests/jobs/test_actions.py",  # actions handed to the broker, carried out by workers
    "tests/jobs/test_rerun.py",  # runs again handed to the broker, started by workers
    "tests/accesscontrol/test_signup.py",  # a request waiting on the workers' answer
    "tests/protection/test_end_to_end.py",  # handlers as broker tasks, real processes
    "tests/protection/test_handlers.py",
    "tests/accesscontrol/test_signals.py",  # grant rechecks handed to the broker
    "tests/accesscontrol/test_changes.py",  # the change token's triggers, per database
    "tests/accesscontrol/test_api.py",  # smoke
    "tests/api/test_errors.py",  # database errors turned into answers
    "tests/api/test_limits.py",  # NUL, repeated ids and sizes the database would refuse
    "tests/api/test_stale_edits.py",  # row locks (select_for_update) differ by database
    "tests/api/test_throttling.py",  # counters in the cache
    "tests/api/test_tokens.py",  # smoke
    "tests/cli/test_login.py",  # smoke
    "tests/security/test_deploy_check.py",  # production settings
    "tests/fairuse/test_idle_end_to_end.py",  # idle checks as broker tasks, real processes
    "tests/notifications/test_delivery.py",  # deliveries claimed once under races, retries
    # Schemathesis against daphne: what each database refuses. (The in-process fuzz,
    # tests/api/test_fuzz.py, runs once: bad values are refused before any database.)
    "tests/api/test_fuzz_live.py",
    "tests/accounting/test_rollup.py",  # GPU-hours summed and bucketed by day in SQL
    "tests/monitoring/test_steady_recording.py",  # bulk writes (executemany) per database
    "tests/queueing/test_fairshare.py",  # decayed usage aggregated in SQL
    "tests/security/test_edges_proxy.py",  # counters shared by web processes (DB cache, Redis)
    "tests/api/test_asgi_handler.py",  # request threads kept with their database connections
)


# Under a directory above, but alike in both runs: they bring their own parts whatever the
# profile, so the first run has them.
NOT_PROFILE_PATHS = (
    "tests/faults/test_postgres_restart.py",  # a PostgreSQL cluster of its own (initdb)
)


def pytest_configure(config):
    from tests import flush

    flush.install()


def pytest_collection_modifyitems(config, items):
    """Mark the profile's tests; with HIVE_TESTS=profile, run only those."""
    root = str(config.rootpath) + os.sep
    for item in items:
        path = str(item.path).removeprefix(root).replace(os.sep, "/")
        if path.startswith(PROFILE_PATHS) and not path.startswith(NOT_PROFILE_PATHS):
            item.add_marker(pytest.mark.profile)
    if os.environ.get("HIVE_TESTS") != "profile":
        return
    selected = [item for item in items if item.get_closest_marker("profile")]
    deselected = [item for item in items if not item.get_closest_marker("profile")]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = selected


# How long a process the test told to end may take to do so before it counts as left behind.
LEFTOVER_GRACE_SECONDS = 5.0


@pytest.fixture(autouse=True)
def _no_process_left_behind(tmp_path_factory):
    """Fails the test that leaves a process running (its own descendants, and processes whose
    command line names this run's temporary directory, like screen windows), after a grace
    period for those already ending, and ends them. The first autouse fixture: it looks
    after every other function fixture has cleaned up."""
    if not os.path.isdir("/proc/self"):  # (the suite runs on Linux; elsewhere: no check)
        yield
        return
    marks = (f"{tmp_path_factory.getbasetemp()}{os.sep}",)
    before = leftovers.ours(marks)
    yield
    if left := leftovers.left_behind(before, marks, grace=LEFTOVER_GRACE_SECONDS):
        leftovers.end(left)
        names = "\n  ".join(map(str, left))
        pytest.fail(f"the test left {len(left)} process(es) running:\n  {names}", pytrace=False)


@pytest.fixture(autouse=True)
def _no_ssh_connection_kept():
    """The service keeps its SSH connections open in process-wide pools (monitoring's, and
    one per account for jobs); a test's end closes them, so the sshd's session processes
    end with the test that opened them (checked just after, by the fixture above)."""
    yield
    from jobs import remote
    from monitoring.connections import pool

    pool.close()
    remote.close_all()


@pytest.fixture(scope="session")
def hive_data_dir(tmp_path_factory):
    """The data directory of the service under test (keys, generated files)."""
    return tmp_path_factory.mktemp("hive-data")


@pytest.fixture(autouse=True)
def _isolated_data_dir(settings, hive_data_dir):
    settings.HIVE_DATA_DIR = hive_data_dir
    settings.SSH_KEY_PATH = hive_data_dir / "ssh" / "id_ed25519"


@pytest.fixture(autouse=True)
def _fresh_cache():
    """Sign-in, sign-up and mail counters and DRF throttles live in the cache: each test
    starts at zero."""
    cache.clear()
    yield
    cache.clear()


@pytest.fixture(autouse=True)
def _own_channel_layer(settings):
    """Each test gets its own channel layer, as it gets its own event loop (``async_to_sync``):
    channels_redis binds a layer's receive lock to the loop that first waits on it, so a
    socket still closing when an earlier test's loop ended (a slow disconnect on a loaded
    machine) would fail the next test's socket. Setting CHANNEL_LAYERS again makes channels
    drop the layers it made (``setting_changed``)."""
    settings.CHANNEL_LAYERS = deepcopy(django_settings.CHANNEL_LAYERS)


@pytest.fixture(autouse=True)
def _no_access_facts_kept():
    """Each test starts with no access facts kept by this process (accesscontrol.changes),
    so the queries it counts do not depend on the tests before it."""
    from accesscontrol import changes

    changes.forget()


@pytest.fixture
def production_hashers(settings):
    """Passwords hashed as in production (tests/settings.py makes them cheap elsewhere)."""
    settings.PASSWORD_HASHERS = django_settings.PRODUCTION_PASSWORD_HASHERS


@pytest.fixture
def owner(db):
    return get_user_model().objects.create_user("owner", "owner@example.org", "pw-owner-1")


@pytest.fixture
def other_user(db):
    return get_user_model().objects.create_user("other", "other@example.org", "pw-other-1")


@pytest.fixture
def admin_user(db):
    return get_user_model().objects.create_superuser("boss", "boss@example.org", "pw-boss-1")
