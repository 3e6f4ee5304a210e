"""The GPU list is its serializer's answer, in queries that do not grow with the number of
hosts and GPUs (the hosts, and their snapshots, read once each)."""

import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from monitoring.api import DeviceSerializer
from monitoring.models import Device, Host

pytestmark = pytest.mark.django_db


def gpu(uuid, used):
    return {"index": 0, "uuid": uuid, "name": "T4", "memory_total_mib": 15360,
            "memory_used_mib": used, "utilization_gpu": 5, "utilization_memory": 1,
            "temperature_c": 40, "power_w": None}  # fmt: skip


def make_hosts(count, first=0):
    for h in range(first, first + count):
        status = Host.Status.UNREACHABLE if h % 3 == 2 else Host.Status.UP
        uuids = [f"GPU-{h}-{i}" for i in range(4)]
        # GPU 3 is not in the snapshot; GPU 0 appears twice (the first one counts)
        snapshot = {
            "gpus": [gpu(uuids[0], 1), gpu(uuids[0], 2), gpu(uuids[1], 3), gpu(uuids[2], 4)]
        }
        host = Host.objects.create(
            name=f"n{h:02d}", address=f"10.0.0.{h + 1}", status=status, last_snapshot=snapshot
        )
        for i, uuid in enumerate(uuids):
            lost = Device.Status.LOST if i == 2 else Device.Status.PRESENT
            Device.objects.create(host=host, index=i, uuid=uuid, status=lost)


def test_the_api_answers_the_same_and_its_queries_do_not_grow(client, owner):
    client.force_login(owner)

    def queries():
        with CaptureQueriesContext(connection) as captured:
            answer = client.get("/api/devices/")
        assert answer.json() == json.loads(
            json.dumps(DeviceSerializer(Device.objects.select_related("host"), many=True).data)
        )
        return len(captured)

    make_hosts(1)
    Host.objects.filter(name="n00").update(last_snapshot=None)
    few = queries()
    make_hosts(9, first=1)
    assert queries() == few
