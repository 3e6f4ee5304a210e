"""/healthz: what monitors and load balancers read. Its shape, 200 and 503, the same answer
for everyone (monitors have no account), and 503 rather than 500 when parts are gone."""

import json
import urllib.error
import urllib.request
from datetime import timedelta

import pytest
from django.utils import timezone

from core.models import Activity
from monitoring.loop import LOOP_ACTIVITY
from monitoring.models import WorkerCluster
from tests.realparts import free_port
from tests.security.conftest import Daphne, service_env

CHECKS = {"database", "broker", "probe", "tasks", "deliveries", "upgrade"}


@pytest.fixture
def heartbeat(db, settings):
    """A probing cycle and a finished task, both just now; the supervisor's limit 30 s."""
    settings.WORKERS_STALL_SECONDS = 30
    now = timezone.now()
    Activity.objects.create(name=LOOP_ACTIVITY, last_success_at=now - timedelta(seconds=1))
    WorkerCluster.objects.create(
        name="vm:1", started_at=now, last_check_at=now, last_task_at=now - timedelta(seconds=2)
    )
    return now


def healthz(client):
    response = client.get("/healthz")
    assert response["Content-Type"] == "application/json"
    assert "no-cache" in response["Cache-Control"]
    return response.status_code, response.json()


def test_it_is_ok_when_every_part_answers_and_the_heartbeat_is_fresh(client, heartbeat):
    status, body = healthz(client)
    assert status == 200
    assert body["status"] == "ok"
    assert set(body["checks"]) == CHECKS
    assert body["checks"]["database"] == {"ok": True}
    assert body["checks"]["broker"] == {"ok": True}
    assert body["checks"]["probe"]["ok"] and 1 <= body["checks"]["probe"]["age_seconds"] < 10
    assert body["checks"]["tasks"]["ok"] and 2 <= body["checks"]["tasks"]["age_seconds"] < 10


@pytest.mark.parametrize("persona", ["anonymous", "owner", "other_user", "admin_user"])
def test_everyone_gets_the_same_answer_and_nothing_more(client, heartbeat, persona, request):
    if persona != "anonymous":
        client.force_login(request.getfixturevalue(persona))
    status, body = healthz(client)
    assert status == 200
    assert set(body) == {"status", "checks"} and set(body["checks"]) == CHECKS


@pytest.mark.parametrize("method", ["post", "put", "delete"])
def test_it_only_reads(client, heartbeat, method):
    assert getattr(client, method)("/healthz").status_code == 405


@pytest.mark.parametrize("stale", ["probe", "tasks"])
def test_a_stale_heartbeat_is_503(client, heartbeat, stale):
    old = timezone.now() - timedelta(seconds=31)
    if stale == "probe":
        Activity.objects.update(last_success_at=old)
    else:
        WorkerCluster.objects.update(last_task_at=old)
    status, body = healthz(client)
    assert status == 503 and body["status"] == "failing"
    assert body["checks"][stale]["ok"] is False and body["checks"][stale]["age_seconds"] >= 31
    assert all(check["ok"] for name, check in body["checks"].items() if name != stale)


def test_workers_that_never_ran_are_503(client, db):
    status, body = healthz(client)
    assert status == 503
    assert body["checks"]["tasks"] == {"ok": False, "age_seconds": None}
    assert body["checks"]["probe"] == {"ok": False, "age_seconds": None}


def test_a_broker_that_does_not_answer_is_503(client, heartbeat, settings):
    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    status, body = healthz(client)
    assert status == 503
    assert body["checks"]["broker"] == {"ok": False}
    assert body["checks"]["database"] == {"ok": True}
    assert "127.0.0.1" not in json.dumps(body)  # no error text, no address


def test_a_database_that_does_not_answer_is_503_not_500(tmp_path):
    """A real daphne whose database is a port where nothing listens."""
    env = service_env(tmp_path, DATABASE_URL=f"postgres://hive@127.0.0.1:{free_port()}/hive")
    server = Daphne(env, collect_static=False)
    try:
        with pytest.raises(urllib.error.HTTPError) as answer:
            urllib.request.urlopen(f"http://127.0.0.1:{server.port}/healthz", timeout=30)
        body = json.loads(answer.value.read())
    finally:
        server.stop()
    assert answer.value.code == 503
    assert body["status"] == "failing"
    assert body["checks"]["database"] == {"ok": False}
    assert body["checks"]["tasks"] == {"ok": False, "age_seconds": None}


def test_a_load_balancer_may_ask_over_plain_http_behind_the_https_redirect(
    client, heartbeat, settings
):
    settings.SECURE_SSL_REDIRECT = True
    assert client.get("/accounts/login/").status_code == 301  # pages go to https
    assert client.get("/healthz").status_code == 200
