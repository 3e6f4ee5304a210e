"""The live dashboard's websocket, through the real ASGI application and session login."""

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings as django_settings
from django.utils import timezone

from hiveproject.asgi import application
from monitoring import consumers
from monitoring.loop import ProbeLoop
from monitoring.models import Device, Host
from tests.monitoring.conftest import make_host
from tests.monitoring.test_loop import settle
from tests.monitoring.test_ssh_probe import UUID0, gpu_row

URL = "/ws/monitoring/live/"
# database_sync_to_async closes connections after each call, so no wrapping transaction.
pytestmark = pytest.mark.django_db(transaction=True)


def communicator(client=None):
    headers = [(b"origin", b"http://localhost")]
    if client is not None:
        cookie = client.cookies[django_settings.SESSION_COOKIE_NAME].value
        headers.append((b"cookie", f"{django_settings.SESSION_COOKIE_NAME}={cookie}".encode()))
    return WebsocketCommunicator(application, URL, headers=headers)


@pytest.fixture
def lab(node):
    """node-1 up with a lost GPU; node-2 down with its last error."""
    Device.objects.create(host=node, index=1, uuid="GPU-9", name="Tesla T4", status="lost")
    return node


def test_anonymous_visitors_get_nothing(lab):
    async def scenario():
        ws = communicator()
        connected, code = await ws.connect()
        assert not connected and code == 4401
        assert await ws.receive_nothing(timeout=0.3)

    async_to_sync(scenario)()


def test_signed_in_users_get_the_snapshot_at_once(client, lab, owner):
    client.force_login(owner)

    async def scenario():
        ws = communicator(client)
        connected, _ = await ws.connect()
        assert connected
        message = await ws.receive_json_from(timeout=5)
        await ws.disconnect()
        return message

    message = async_to_sync(scenario)()
    hosts = {h["name"]: h for h in message["hosts"]}
    assert hosts["node-1"]["gpus"][0]["utilization_gpu"] == 7
    assert hosts["node-1"]["gpus"][0]["device_id"] == Device.objects.get(uuid="GPU-1").pk
    # Not the viewer's process: its command line (secrets) stays hidden (tests/security).
    assert hosts["node-1"]["processes"][0]["command"] == "command hidden"
    assert [g["uuid"] for g in hosts["node-1"]["lost_gpus"]] == ["GPU-9"]
    assert not hosts["node-2"]["up"] and "timed out" in hosts["node-2"]["last_error"]


def test_nothing_is_resent_while_nothing_changed(client, lab, owner, settings):
    settings.MONITORING_INTERVAL = 0.1
    client.force_login(owner)

    async def scenario():
        ws = communicator(client)
        await ws.connect()
        await ws.receive_json_from(timeout=5)
        quiet = await ws.receive_nothing(timeout=0.5)
        await ws.disconnect()
        return quiet

    assert async_to_sync(scenario)()


def test_a_change_on_a_host_reaches_the_dashboard_within_an_interval(
    client, owner, sshd, gpus, settings
):
    """End to end: fake nvidia-smi -> loop cycle -> database -> websocket, no Redis."""
    settings.MONITORING_INTERVAL = 0.5
    settings.SSH_CONNECT_TIMEOUT = 3
    fake = gpus("127.0.0.2")
    fake.set_gpus([gpu_row(0, UUID0, used=1000)])
    make_host(sshd, "node-2", "127.0.0.2")
    loop = ProbeLoop(holder="t")
    client.force_login(owner)

    async def scenario():
        ws = communicator(client)
        await ws.connect()
        await sync_to_async(settle)(loop)
        first = await latest(ws)
        fake.set_gpus([gpu_row(0, UUID0, used=30000)])
        await sync_to_async(settle)(loop)
        second = await ws.receive_json_from(timeout=2 * settings.MONITORING_INTERVAL + 1)
        await ws.disconnect()
        return first, second

    first, second = async_to_sync(scenario)()
    assert first["hosts"][0]["gpus"][0]["memory_used_mib"] == 1000
    assert second["hosts"][0]["gpus"][0]["memory_used_mib"] == 30000
    loop.executor.shutdown(wait=True)


async def latest(ws):
    """The newest message once the socket has gone quiet (skips "not probed yet" ones)."""
    message = await ws.receive_json_from(timeout=5)
    while message["hosts"][0]["status"] != "up" or not await ws.receive_nothing(timeout=0.7):
        message = await ws.receive_json_from(timeout=5)
    return message


def test_the_loops_group_message_pushes_without_waiting_for_the_poll(
    client, owner, sshd, gpus, settings
):
    """With a shared channel layer (Redis in production), a cycle is pushed at once."""
    settings.MONITORING_INTERVAL = 60  # the poll would not fire during this test
    settings.SSH_CONNECT_TIMEOUT = 3
    gpus("127.0.0.2").set_gpus([gpu_row(0, UUID0, used=1234)])
    make_host(sshd, "node-2", "127.0.0.2")
    loop = ProbeLoop(holder="t")
    loop.interval = 0.5  # cycles stay short; only the consumer's poll is slowed down
    client.force_login(owner)

    async def scenario():
        ws = communicator(client)
        await ws.connect()
        await ws.receive_json_from(timeout=5)  # "not probed yet"
        await sync_to_async(settle)(loop)
        pushed = await ws.receive_json_from(timeout=5)
        await ws.disconnect()
        return pushed

    pushed = async_to_sync(scenario)()
    assert pushed["hosts"][0]["gpus"][0]["memory_used_mib"] == 1234
    loop.executor.shutdown(wait=True)


def test_after_the_snapshot_only_changed_hosts_and_keys_are_sent(client, lab, owner, settings):
    """Per-host diffs: a probe of node-1 sends node-1's changed keys (and its identity), not
    node-2, which did not change; a host disabled is listed as removed."""
    settings.MONITORING_INTERVAL = 0.1
    client.force_login(owner)
    node2 = Host.objects.get(name="node-2")

    async def scenario():
        ws = communicator(client)
        await ws.connect()
        first = await ws.receive_json_from(timeout=5)
        await sync_to_async(probe_again)(lab)
        changed = await ws.receive_json_from(timeout=5)
        await sync_to_async(Host.objects.filter(pk=node2.pk).update)(enabled=False)
        gone = await ws.receive_json_from(timeout=5)
        await ws.disconnect()
        return first, changed, gone

    first, changed, gone = async_to_sync(scenario)()
    assert first["type"] == "snapshot" and len(first["hosts"]) == 2
    assert changed["type"] == "changes" and changed["removed"] == []
    [entry] = changed["hosts"]
    assert entry["id"] == lab.pk and entry["gpus"][0]["utilization_gpu"] == 99
    assert set(entry) == {"id", "name", "status", "up", "gpus", "last_probe_at"}
    assert gone["hosts"] == [] and gone["removed"] == [node2.pk]


def probe_again(host):
    """As a new probe of ``host`` stores it: new figures for its GPU, a new probe time."""
    snapshot = {**host.last_snapshot}
    snapshot["gpus"] = [{**snapshot["gpus"][0], "utilization_gpu": 99}]
    Host.objects.filter(pk=host.pk).update(last_snapshot=snapshot, last_probe_at=timezone.now())


def test_the_stream_ends_when_the_session_does(client, lab, owner, settings, monkeypatch):
    # Before: a socket kept streaming the lab to a browser that had signed out.
    settings.MONITORING_INTERVAL = 0.1
    monkeypatch.setattr(consumers, "SESSION_RECHECK_SECONDS", 0.2)
    client.force_login(owner)

    async def scenario():
        ws = communicator(client)
        await ws.connect()
        await ws.receive_json_from(timeout=5)
        await sync_to_async(client.logout)()  # the session is flushed from the store
        closed = await ws.receive_output(timeout=5)
        return closed

    assert async_to_sync(scenario)() == {"type": "websocket.close", "code": 4401}
