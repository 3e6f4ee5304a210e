"""Hardware facts and disk usage: probed over the real sshd, kept on the host, stored as history."""

from datetime import UTC, datetime, timedelta

import pytest
from django.core import checks

from monitoring.history import downsample, store_samples
from monitoring.inventory import probe_and_record
from monitoring.models import DiskMetric, Host, Resolution
from monitoring.parsers import DiskUsage
from monitoring.probes import ProbeResult
from tests.monitoring.test_ssh_probe import UUID0, gpu_row

VERSION_FILES = ("driver-version", "cuda-version", "old-driver")


@pytest.fixture
def fake(gpus):
    """127.0.0.2's fake GPUs with the default driver (the folder outlives each test)."""
    fake = gpus("127.0.0.2")
    for name in VERSION_FILES:
        (fake.dir / name).unlink(missing_ok=True)
    fake.set_gpus([gpu_row(0, UUID0)])
    yield fake
    for name in VERSION_FILES:
        (fake.dir / name).unlink(missing_ok=True)


def test_a_probe_reports_cpu_ram_driver_and_configured_disks(ssh_host, fake, settings, tmp_path):
    # A path with a space, quotes and a command substitution: it must arrive as one argument.
    odd = tmp_path / "scratch space; $(touch pwned) 'q'"
    odd.mkdir()
    settings.MONITORING_DISK_PATHS = ["/", str(odd), "/no/such/path"]
    (fake.dir / "driver-version").write_text("550.54.14\n")
    (fake.dir / "cuda-version").write_text("12.4\n")
    result = probe_and_record(ssh_host)
    assert result.error is None
    assert (result.driver_version, result.cuda_version) == ("550.54.14", "12.4")
    assert [d.path for d in result.disks] == ["/", str(odd)]  # the missing path is skipped
    assert all(0 <= d.used_mib <= d.total_mib for d in result.disks)
    assert not (tmp_path / "pwned").exists() and not list(tmp_path.glob("**/pwned"))
    with open("/proc/cpuinfo") as cpuinfo:
        processors = sum(line.startswith("processor") for line in cpuinfo)
    assert result.cpu["cores"] == processors
    assert result.cpu["model"]  # whatever this machine's CPU is called, it is named
    ssh_host.refresh_from_db()
    hardware = ssh_host.hardware
    assert hardware["driver_version"] == "550.54.14" and hardware["cpu_cores"] == processors
    assert [d["path"] for d in hardware["disks"]] == ["/", str(odd)]


def test_older_drivers_give_their_versions_through_the_q_report(ssh_host, fake):
    (fake.dir / "old-driver").write_text("")
    (fake.dir / "driver-version").write_text("470.182.03\n")
    (fake.dir / "cuda-version").write_text("11.4\n")
    result = probe_and_record(ssh_host)
    assert (result.driver_version, result.cuda_version) == ("470.182.03", "11.4")


def test_versions_are_asked_when_unknown_or_on_demand_not_every_probe(ssh_host, fake):
    probe_and_record(ssh_host)
    (fake.dir / "driver-version").write_text("550.54.14\n")  # upgraded behind our back
    assert probe_and_record(ssh_host).driver_version == "535.104.05"  # kept, not asked
    assert probe_and_record(ssh_host, force=True).driver_version == "550.54.14"
    ssh_host.refresh_from_db()
    assert ssh_host.hardware["driver_version"] == "550.54.14"


def test_the_last_known_hardware_stays_while_the_host_is_down_or_nvidia_smi_fails(
    ssh_host, fake, settings
):
    probe_and_record(ssh_host)
    fake.set_mode("fail")  # nvidia-smi says nothing: versions stay as they were
    probe_and_record(ssh_host)
    ssh_host.refresh_from_db()
    assert ssh_host.hardware["driver_version"] == "535.104.05"
    ssh_host.port = 1  # nothing listens there: the host is down
    ssh_host.save()
    settings.SSH_CONNECT_TIMEOUT = 1
    assert not probe_and_record(ssh_host).reachable
    ssh_host.refresh_from_db()
    assert ssh_host.status == Host.Status.UNREACHABLE
    assert ssh_host.hardware["driver_version"] == "535.104.05"
    assert ssh_host.hardware["memory_total_mib"] > 0


T0 = datetime(2026, 3, 1, 10, 0, tzinfo=UTC)


def probed(host, *disks):
    return ProbeResult(host.name, True, "up", gpus=[], disks=[DiskUsage(*d) for d in disks])


def test_disk_usage_is_stored_and_averaged_per_path(db):
    host = Host.objects.create(name="n1", address="10.0.0.1")
    store_samples([(host, probed(host, ("/", 1000, 100), ("/home", 500, 10)))], T0)
    store_samples([(host, probed(host, ("/", 1000, 300)))], T0 + timedelta(seconds=30))
    down = ProbeResult("n1", False, "unreachable")
    store_samples([(host, down)], T0 + timedelta(seconds=40))  # nothing stored for it
    assert DiskMetric.objects.filter(step=Resolution.RAW).count() == 3
    downsample(now=T0 + timedelta(minutes=2))
    minutes = DiskMetric.objects.filter(step=Resolution.MINUTE).order_by("path")
    assert [(m.path, m.used_mib, m.total_mib) for m in minutes] == [
        ("/", 200.0, 1000.0),
        ("/home", 10.0, 500.0),
    ]


def test_relative_disk_paths_are_refused_at_start_up(settings):
    settings.MONITORING_DISK_PATHS = ["/", "home", "/a\nb"]
    errors = [e for e in checks.run_checks() if e.id == "monitoring.E001"]
    assert len(errors) == 2 and "'home'" in errors[0].msg
    settings.MONITORING_DISK_PATHS = ["/", "/home"]
    assert not [e for e in checks.run_checks() if e.id == "monitoring.E001"]


def test_the_host_history_api_gives_disk_series_per_path(client, owner):
    host = Host.objects.create(name="n1", address="10.0.0.1")
    now = datetime.now(UTC)
    store_samples([(host, probed(host, ("/", 1000, 100), ("/home", 500, 10)))], now)
    client.force_login(owner)
    body = client.get(f"/api/hosts/{host.pk}/history/").json()
    assert body["resolution"] == "raw" and len(body["samples"]) == 1
    assert {path: [s["used_mib"] for s in rows] for path, rows in body["disks"].items()} == {
        "/": [100.0],
        "/home": [10.0],
    }
    assert client.get(f"/api/hosts/{host.pk}/").json()["hardware"] is None
