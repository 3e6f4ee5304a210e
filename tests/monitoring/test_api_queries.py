"""The GPU list is read with values(): the serializer's answer, in queries that do not grow
with the number of hosts and GPUs."""

import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from monitoring.api import DeviceSerializer, device_rows
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


@pytest.mark.parametrize("zone", ["UTC", "America/New_York"])
def test_the_lean_list_answers_what_the_serializer_answers(zone):
    make_hosts(4)
    Host.objects.filter(name="n01").update(last_snapshot=None)
    timezone.activate(zone)
    try:
        queryset = Device.objects.select_related("host")
        assert device_rows(queryset) == DeviceSerializer(queryset, many=True).data
        page = Device.objects.select_related("host")[3:9]
        assert device_rows(page) == DeviceSerializer(page, many=True).data
    finally:
        timezone.deactivate()


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
    few = queries()
    make_hosts(9, first=1)
    assert queries() == few
