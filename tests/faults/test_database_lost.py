"""The database goes away: down while requests come in, or restarted under open connections.

The shared PostgreSQL server is not restarted here: our sessions are terminated
(pg_terminate_backend) from another connection, which is what a restart does to each
client (test_postgres_restart.py restarts a server of its own for real). SQLite has no
connection to lose: those tests run on CI's PostgreSQL pass.
"""

import http.client
import json

import psycopg
import pytest
from django.conf import settings
from django.db import connection

from core.models import Activity
from monitoring.loop import LOOP_ACTIVITY
from monitoring.models import Host
from monitoring.signals import cycle_finished
from tests.faults.test_ssh_host_dies import cycles_until
from tests.monitoring.conftest import make_host
from tests.monitoring.test_ssh_probe import UUID0, gpu_row
from tests.realparts import free_port
from tests.security.conftest import Daphne, service_env

pytestmark = pytest.mark.django_db(transaction=True)


def cut_our_connection():
    """Terminate this process's database session from outside, as a server restart does."""
    connection.ensure_connection()
    pid = connection.connection.info.backend_pid
    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)
    with psycopg.connect(**params, autocommit=True) as other:
        other.execute("SELECT pg_terminate_backend(%s)", [pid])


def test_a_cut_connection_fails_one_cycle_recorded_then_the_loop_recovers(
    postgresql_only, loop, mortal_sshd, gpus
):
    gpus("127.0.0.2").set_gpus([gpu_row(0, UUID0)])
    host = make_host(mortal_sshd, "node-2", "127.0.0.2")
    cycles_until(loop, host, lambda h: h.status == Host.Status.UP)
    cut_our_connection()
    loop.cycle_safely()  # this cycle's writes fail; the loop must survive and say so
    cycles = loop.cycles
    for _ in range(3):
        loop.cycle_safely()
    assert loop.cycles > cycles  # later cycles complete on a new connection
    activity = Activity.objects.get(name=LOOP_ACTIVITY)
    assert "cycle failed" in activity.last_error
    assert activity.last_success_at > activity.last_error_at


def cut_other_connections():
    """Terminate every other session on the test database: the web server's among them."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        return cursor.fetchone()[0]


def test_a_request_while_the_database_is_down_fails_cleanly(client, owner, tmp_path):
    """Nothing listens where the database should be: an error page, and nothing revealed."""
    client.force_login(owner)
    session = {"Cookie": f"sessionid={client.cookies['sessionid'].value}"}
    url = f"postgres://hive:pw-db-secret@127.0.0.1:{free_port()}/hive"
    env = service_env(
        tmp_path, SECRET_KEY=settings.SECRET_KEY, DATABASE_URL=url, DATABASE_POOL_TIMEOUT="2"
    )
    server = Daphne(env, collect_static=False)
    try:
        for path in ("/", "/api/devices/"):
            status, body = get(server, path, session)
            assert status == 500
            assert not any(s in body for s in ("Traceback", "pw-db-secret", "Operational"))
        # The API keeps its one error shape even then.
        assert json.loads(get(server, "/api/devices/", session)[1])["detail"]
    finally:
        server.stop()


def test_the_web_server_serves_the_next_request_after_its_connection_was_cut(
    postgresql_only, client, owner, tmp_path
):
    client.force_login(owner)
    session = {"Cookie": f"sessionid={client.cookies['sessionid'].value}"}
    # The same secret key, so the server accepts the session signed in here.
    server = Daphne(service_env(tmp_path, SECRET_KEY=settings.SECRET_KEY), collect_static=False)
    try:
        assert get(server, "/api/devices/", session)[0] == 200
        assert cut_other_connections() >= 1
        assert get(server, "/api/devices/", session)[0] == 200
    finally:
        server.stop()


def get(server, path, headers) -> tuple[int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    conn.request("GET", path, headers={"Host": "localhost", **headers})
    response = conn.getresponse()
    body = response.read().decode(errors="replace")
    conn.close()
    return response.status, body


def test_a_connection_cut_between_cycles_skips_a_cycle_and_the_loop_goes_on(
    postgresql_only, loop, mortal_sshd, gpus
):
    """The cut is noticed when the loop renews its lease: that cycle is skipped, recorded."""
    gpus("127.0.0.2").set_gpus([gpu_row(0, UUID0)])
    host = make_host(mortal_sshd, "node-2", "127.0.0.2")
    cycles_until(loop, host, lambda h: h.status == Host.Status.UP)
    cuts = []

    def cut_once(sender, **kwargs):  # the fault, injected right after a cycle ends
        if not cuts:
            cuts.append(cut_our_connection())

    cycle_finished.connect(cut_once)
    try:
        summary = loop.run(run_for=3.0)
    finally:
        cycle_finished.disconnect(cut_once)
    assert cuts and summary.endswith("cycles") and loop.completed
    activity = Activity.objects.get(name=LOOP_ACTIVITY)
    assert "renewing the lease failed" in activity.last_error
    assert activity.last_success_at > activity.last_error_at
    assert activity.holder == ""  # released at the end, on a fresh connection
