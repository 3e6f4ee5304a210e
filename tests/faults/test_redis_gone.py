"""Redis disappears: the loop keeps probing and recording, notes the failed push, pages serve."""

import pytest

from monitoring.loop import LOOP_ACTIVITY
from monitoring.models import Activity, Host
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
