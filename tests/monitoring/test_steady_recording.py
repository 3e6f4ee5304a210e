"""A cycle's probes that change nothing but the readings are stored in bulk, and leave the
database exactly as storing them one by one (record_probe) would."""

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from audit.models import AuditEvent
from monitoring.inventory import PROBE_FIELDS, record_probe, record_steady_probes
from monitoring.loop import ProbeLoop
from monitoring.models import Device, Host
from monitoring.parsers import DiskUsage, GpuSample
from monitoring.probes import ProbeResult
from monitoring.transport import HostKey

pytestmark = pytest.mark.django_db


def gpu(index, uuid, used=100, name="Tesla T4", total=15360):
    return GpuSample(index, uuid, name, total, used, 7, 1, 40, None)


def probe(host, used=100, status=Host.Status.UP, gpus=None, **fields):
    gpus = (
        [gpu(0, f"GPU-{host.pk}-0", used), gpu(1, f"GPU-{host.pk}-1", used)]
        if gpus is None
        else gpus
    )
    cpu = {"utilization": 3.5, "memory_total_mib": 64000, "memory_used_mib": used, "cores": 8}
    return ProbeResult(
        host.name,
        status != Host.Status.AUTH_FAILED,
        status,
        gpus=gpus,
        cpu=cpu,
        disks=[DiskUsage("/", 1000, used)],
        driver_version="535.104.05",
        cuda_version="12.2",
        **fields,
    )


@pytest.fixture
def hosts():
    """Hosts already probed once: their GPUs are known."""
    made = []
    for i in range(12):
        host = Host.objects.create(name=f"n{i}", address=f"10.0.0.{i + 1}")
        record_probe(host, probe(host, used=1))
        made.append(host)
    return made


def stored(host: Host) -> dict:
    """What the database holds for host, its times as "the probe's time" or not."""
    row = Host.objects.values(*PROBE_FIELDS).get(pk=host.pk)
    probed_at = row.pop("last_probe_at")
    assert row.pop("last_seen") == probed_at
    assert row["hardware"].pop("seen_at") == probed_at.isoformat()
    devices = Device.objects.filter(host=host).order_by("uuid")
    row["devices"] = [
        (d.uuid, d.index, d.name, d.memory_total_mib, d.status, d.last_seen == probed_at)
        for d in devices
    ]
    return row


def test_a_steady_probe_stores_what_record_probe_stores(hosts):
    host = hosts[0]
    result = probe(host, used=2000)
    with transaction.atomic():
        record_probe(Host.objects.get(pk=host.pk), result, seconds=0.25)
        one_by_one = stored(host)
        transaction.set_rollback(True)
    changed = record_steady_probes([(Host.objects.get(pk=host.pk), result, 0.25)], timezone.now())
    assert changed == []
    assert stored(host) == one_by_one
    assert one_by_one["last_snapshot"]["gpus"][0]["memory_used_mib"] == 2000


def test_a_failed_nvidia_smi_leaves_the_gpus_alone_in_bulk_too(hosts):
    host = Host.objects.get(pk=hosts[0].pk)
    before = list(Device.objects.filter(host=host).values_list("last_seen", flat=True))
    result = probe(host, gpus=None)
    result.gpus = None
    assert record_steady_probes([(host, result, 0.1)], timezone.now()) == []
    assert list(Device.objects.filter(host=host).values_list("last_seen", flat=True)) == before


@pytest.mark.parametrize(
    "change",
    ["status", "new gpu", "gpu gone", "gpu renamed", "host key", "lost gpu back"],
)
def test_any_other_change_is_left_to_record_probe(hosts, change):
    host = Host.objects.get(pk=hosts[0].pk)
    uuids = [f"GPU-{host.pk}-0", f"GPU-{host.pk}-1"]
    result = {
        "status": lambda: probe(host, status=Host.Status.ERROR),
        "new gpu": lambda: probe(host, gpus=[gpu(0, uuids[0]), gpu(1, uuids[1]), gpu(2, "new")]),
        "gpu gone": lambda: probe(host, gpus=[gpu(0, uuids[0])]),
        "gpu renamed": lambda: probe(host, gpus=[gpu(0, uuids[0]), gpu(1, uuids[1], name="A")]),
        "host key": lambda: probe(host, new_host_key=HostKey("ssh-ed25519", "AAAA", "SHA256:x")),
        "lost gpu back": lambda: probe(host),
    }[change]()
    if change == "lost gpu back":
        Device.objects.filter(uuid=uuids[1]).update(status=Device.Status.LOST)
    changed = record_steady_probes([(host, result, 0.1)], timezone.now())
    assert changed == [(host, result, 0.1)]


def test_a_change_into_an_alarm_goes_through_save_and_is_audited(hosts):
    host = Host.objects.get(pk=hosts[0].pk)
    refused = ProbeResult(host.name, False, Host.Status.AUTH_FAILED, "authentication failed")
    ProbeLoop(holder="t").store([(host, refused, 0.1)], timezone.now())
    assert AuditEvent.objects.filter(action="host.ssh_login_failed").count() == 1
    host.refresh_from_db()
    assert host.status == Host.Status.AUTH_FAILED


def test_a_cycle_costs_the_same_queries_for_2_or_12_hosts(hosts):
    loop = ProbeLoop(holder="t")

    def queries(count):
        finished = [(h, probe(h, used=count), 0.1) for h in Host.objects.all()[:count]]
        with CaptureQueriesContext(connection) as captured:
            loop.store(finished, timezone.now())
        loop.last_sample.clear()  # history due for every host each time
        return len(captured)

    assert queries(2) == queries(12)
