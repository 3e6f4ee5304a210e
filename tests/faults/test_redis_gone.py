"""Redis disappears: the loop keeps probing and recording, notes the failed push, pages serve;
with the task broker gone too, requests that hand work to the workers still succeed and the
lost hand-over is recorded where admins look."""

import pytest

from core.models import Activity
from monitoring.loop import LOOP_ACTIVITY
from monitoring.models import Host
from tests.faults.test_ssh_host_dies import cycles_until
from tests.monitoring.conftest import make_host
from tests.monitoring.test_ssh_probe import UUID0, gpu_row
from tests.realparts import free_port

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def redis_gone(settings):
    """The channel layer points at a Redis that is not there (nothing listens on the port)."""
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [f"redis://127.0.0.1:{free_port()}/0"]},
        }
    }


def test_the_loop_records_the_failed_push_and_goes_on(redis_gone, loop, mortal_sshd, gpus):
    gpus("127.0.0.2").set_gpus([gpu_row(0, UUID0)])
    host = make_host(mortal_sshd, "node-2", "127.0.0.2")
    cycles_until(loop, host, lambda h: h.status == Host.Status.UP)
    before = loop.cycles
    loop.cycle_safely()
    first_failure_at = Activity.objects.get(name=LOOP_ACTIVITY).last_error_at
    loop.cycle_safely()
    assert loop.cycles == before + 2  # both cycles ran to the end
    activity = Activity.objects.get(name=LOOP_ACTIVITY)
    assert "publishing to the channel layer failed" in activity.last_error
    assert "Connect" in activity.last_error or "refused" in activity.last_error.lower()
    # A cycle records its success before it publishes, so the second cycle's success
    # lies after the first cycle's failed push (not necessarily after its own).
    assert activity.last_success_at > first_failure_at


def test_pages_and_the_api_serve_without_redis(redis_gone, client, owner):
    client.force_login(owner)
    assert client.get("/").status_code == 200
    assert client.get("/api/devices/").status_code == 200


@pytest.fixture
def broker_gone(monkeypatch):
    """django-q2's broker is a Redis where nothing listens (the production profile's broker,
    stopped). Conf is read once at import, so it is patched rather than the settings."""
    from django_q.conf import Conf

    monkeypatch.setattr(Conf, "ORM", None)
    monkeypatch.setattr(Conf, "REDIS", f"redis://127.0.0.1:{free_port()}/0")
    monkeypatch.setattr(Conf, "SYNC", False)


def test_a_booking_succeeds_and_the_lost_queue_round_is_recorded(broker_gone, client, owner):
    from datetime import timedelta

    from django.utils import timezone

    from accesscontrol.services import ensure_default_group
    from monitoring.models import Device
    from queueing.services import TaskRequest, enqueue
    from reservations.models import Reservation

    ensure_default_group()
    host = Host.objects.create(name="node-1", address="10.0.0.1")
    gpu = Device.objects.create(host=host, index=0, uuid="GPU-0")
    enqueue(owner, name="waits", tasks=[TaskRequest(template="true")])  # the queue has work
    start = (timezone.now() + timedelta(days=1)).replace(microsecond=0)
    client.force_login(owner)
    body = {"title": "run", "devices": [gpu.pk], "start": start.isoformat()}
    body["end"] = (start + timedelta(hours=1)).isoformat()
    response = client.post("/api/reservations/", body, content_type="application/json")
    assert response.status_code == 201, response.content
    assert Reservation.objects.filter(title="run").exists()
    activity = Activity.objects.get(name="queue-dispatch")
    assert "queueing queueing.scheduler.dispatch failed" in activity.last_error


def test_probe_now_in_the_admin_says_the_broker_is_unreachable(broker_gone, client, admin_user):
    from monitoring.admin import PROBE_NOW_ACTIVITY

    host = Host.objects.create(name="node-1", address="10.0.0.1")
    client.force_login(admin_user)
    response = client.post(
        "/admin/monitoring/host/",
        {"action": "probe_now", "_selected_action": [host.pk]},
        follow=True,
    )
    assert response.status_code == 200
    assert "Could not queue the probe for 1 host(s)" in response.content.decode()
    assert "probe_host_now failed" in Activity.objects.get(name=PROBE_NOW_ACTIVITY).last_error
