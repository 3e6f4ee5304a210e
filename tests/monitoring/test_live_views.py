"""Each page subscribes to what it shows (?view=): a host page gets its host only, the board
its compact rows; at the demo lab's 800 GPUs the board's first message stays small."""

import json

import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.conf import settings as django_settings
from django.contrib.auth import get_user_model
from django.utils import timezone

from board.demo import seed
from hiveproject.asgi import application
from monitoring.connections import pool
from monitoring.consumers import BAD_SUBSCRIPTION, LiveConsumer
from monitoring.live import BOARD_GPU_FIELDS, live_payload
from monitoring.models import Device, Host
from monitoring.visibility import process_visibility
from protection.models import Violation


def first_message(client, query: str):
    """(connected, close code or None, the first message or None) for ?<query>."""
    cookie = client.cookies[django_settings.SESSION_COOKIE_NAME].value
    headers = [
        (b"origin", b"http://localhost"),
        (b"cookie", f"{django_settings.SESSION_COOKIE_NAME}={cookie}".encode()),
    ]

    async def scenario():
        ws = WebsocketCommunicator(application, f"/ws/monitoring/live/?{query}", headers=headers)
        connected, code = await ws.connect()
        if not connected:
            return False, code, None
        message = await ws.receive_json_from(timeout=5)
        await ws.disconnect()
        return True, None, message

    return async_to_sync(scenario)()


@pytest.fixture
def lab(node):
    """node-1 up (tests/monitoring/conftest) and node-2 down."""
    Device.objects.create(host=node, index=1, uuid="GPU-9", name="Tesla T4", status="lost")
    return node


@pytest.mark.django_db(transaction=True)
def test_a_host_page_gets_only_its_host(client, lab, owner):
    client.force_login(owner)
    other = Host.objects.exclude(pk=lab.pk).get()
    connected, _, message = first_message(client, f"view=host&host={lab.pk}")
    assert connected and [h["name"] for h in message["hosts"]] == [lab.name]
    assert message["hosts"][0]["processes"] and message["hosts"][0]["lost_gpus"]
    _, _, message = first_message(client, f"view=host&host={other.pk}")
    assert [h["name"] for h in message["hosts"]] == [other.name]


@pytest.mark.django_db(transaction=True)
def test_the_board_gets_compact_rows_and_who_runs_where(client, lab, owner):
    client.force_login(owner)
    _, _, message = first_message(client, "view=board")
    hosts = {h["name"]: h for h in message["hosts"]}
    device = Device.objects.get(uuid="GPU-1")
    row = dict(zip(BOARD_GPU_FIELDS, hosts["node-1"]["gpus"][0], strict=True))
    assert row["device_id"] == device.pk and row["utilization_gpu"] == 7
    assert set(hosts["node-1"]) == {"id", "name", "status", "up", "gpus", "users", "intruders"}
    assert hosts["node-1"]["users"][str(device.pk)]  # an owner, never a command line
    assert not hosts["node-2"]["up"] and hosts["node-2"]["gpus"] == []


@pytest.mark.django_db(transaction=True)
def test_the_board_gets_who_intrudes_while_they_do(client, lab, owner):
    """Protection's open violations, per GPU, in the board's rows (registered by protection:
    monitoring does not import it); an ended one is not there."""
    client.force_login(owner)
    now = timezone.now()
    device = Device.objects.get(uuid="GPU-1")
    seen = {"device": device, "first_seen": now, "last_seen": now}
    Violation.objects.create(pid=4242, offender_unix="linus", **seen)
    Violation.objects.create(pid=1, offender_unix="gone", ended_at=now, **seen)
    _, _, message = first_message(client, "view=board")
    hosts = {h["name"]: h for h in message["hosts"]}
    assert hosts["node-1"]["intruders"] == {str(device.pk): "linus"}
    assert hosts["node-2"]["intruders"] == {}
    Violation.objects.filter(offender_unix="linus").update(ended_at=now)
    _, _, message = first_message(client, "view=board")
    assert all(host["intruders"] == {} for host in message["hosts"])


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("query", ["view=everything", "view=host", "view=host&host=node-1"])
def test_a_subscription_it_cannot_read_is_closed_with_a_reason(client, lab, owner, query):
    client.force_login(owner)
    connected, code, _ = first_message(client, query)
    assert not connected and code == BAD_SUBSCRIPTION


@pytest.mark.django_db
def test_the_boards_first_message_at_800_gpus_is_at_most_30_kb(settings, tmp_path):
    """A size bound, not a timing: the demo lab at 100 hosts x 8 GPUs, encoded as sent."""
    settings.HIVE_DATA_DIR = tmp_path
    pool.close()
    try:
        seed(hosts=100, gpus=8, history_hours=0, down=2)
    finally:
        pool.close()
    visibility = process_visibility(get_user_model().objects.get(username="ada"))
    board = async_to_sync(LiveConsumer.encode_json)(live_payload(visibility, "board"))
    full = json.dumps(live_payload(visibility))
    assert sum(len(h["gpus"]) for h in json.loads(board)["hosts"]) >= 780  # the up hosts'
    assert len(board.encode()) <= 30_000 < len(full.encode())
