"""MIG slices as the probe sees them, over real MIG machines' outputs
(tests/fixtures/nvidia-smi-mig, whose README says where each comes from): the parsers, a
probe's output read whole, a probe over a real sshd recording the slices, and a changed
MIG layout handled as a changed inventory."""

import os
import pwd
from pathlib import Path

from django.utils import timezone

from monitoring import parsers
from monitoring.history import store_samples
from monitoring.inventory import probe_and_record, record_probe, record_steady_probes
from monitoring.models import Device, GpuMetric, Host
from monitoring.probes import ProbeResult, _interpret, _sections, probe_host
from tests.realparts import FakeGpus, capture_rows

CAPTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nvidia-smi-mig"
H100, H200 = CAPTURES / "h100", CAPTURES / "h200"
GPU = "GPU-00000000-0000-0000-0000-000000000000"  # masked in both captures
APP_FIELDS = ["gpu_uuid", "pid", "used_gpu_memory", "process_name"]


def mig(n: int) -> str:
    """The capture's (masked) UUID of MIG device n."""
    return f"MIG-{n:08d}-0000-0000-0000-{n:012d}"


def probe_output(folder: Path, list_rc: int = 0) -> str:
    """What sample.sh prints on that machine: its answers in the probe's sections."""
    fields = ",".join(parsers.PROBE_GPU_FIELDS)
    gpus = "\n".join(capture_rows(folder / "query-gpu-load.csv", parsers.PROBE_GPU_FIELDS))
    apps = "\n".join(capture_rows(folder / "compute-apps-load.csv", APP_FIELDS))
    return (
        f"@@gpus 0 {fields}\n{gpus}\n@@apps 0\n{apps}\n@@ps\n"
        f"@@mig-list {list_rc}\n{(folder / 'list.txt').read_text()}"
        f"@@mig-query 0\n{(folder / 'query-load.txt').read_text()}"
        "@@meminfo\nMemTotal: 2048 kB\nMemAvailable: 1024 kB\n"
        "@@stat\ncpu  1 0 1 8 0 0 0 0 0 0\ncpu  2 0 2 16 0 0 0 0 0 0\n"
    )


def probed(folder: Path, list_rc: int = 0) -> ProbeResult:
    return _interpret("mig", _sections(probe_output(folder, list_rc)), 10)


def test_the_list_names_each_slice_under_its_gpu():
    assert parsers.parse_mig_list((H100 / "list.txt").read_text()) == {
        GPU: [
            (0, "3g.40gb", mig(0)),
            (1, "2g.20gb", mig(1)),
            (2, "1g.10gb", mig(2)),
            (3, "1g.10gb", mig(3)),
        ]
    }
    [(_, slices)] = parsers.parse_mig_list((H200 / "list.txt").read_text()).items()
    assert [profile for _, profile, _ in slices] == [
        "1c.3g.71gb",
        "2c.3g.71gb",
        "2g.35gb",
        "1g.18gb",
        "1g.18gb",
    ]


def test_the_report_gives_each_slices_memory_and_each_processs_instance():
    report = parsers.parse_query_report((H100 / "query-load.txt").read_text())
    devices = report.mig_devices[GPU]
    assert devices[0] == {
        "gpu_instance": 2,
        "compute_instance": 0,
        "memory_total_mib": 40448,
        "memory_used_mib": 11091,
    }
    assert [devices[n]["memory_total_mib"] for n in (1, 2, 3)] == [20096, 9984, 9984]
    assert report.processes[GPU] == {21180: (2, 0), 21181: (2, 0), 21198: (2, 0)}
    # Two compute instances of one GPU instance report the memory they share.
    h200 = parsers.parse_query_report((H200 / "query-load.txt").read_text()).mig_devices[GPU]
    assert (h200[0]["gpu_instance"], h200[1]["gpu_instance"]) == (2, 2)
    assert h200[0]["memory_used_mib"] == h200[1]["memory_used_mib"] == 16925
    idle = parsers.parse_query_report((H100 / "query-idle.txt").read_text())
    assert idle.processes == {GPU: {}} and len(idle.mig_devices[GPU]) == 4  # "Processes: None"


def test_a_gpu_without_mig_reports_no_slices_and_no_instances():
    """Our own H100 capture, MIG disabled: its process has no instance (N/A)."""
    own = Path(__file__).resolve().parents[1] / "fixtures" / "nvidia-smi-h100" / "nvidia-smi-q.txt"
    report = parsers.parse_query_report(own.read_text())
    [(uuid, devices)] = report.mig_devices.items()
    assert devices == {} and report.processes[uuid] == {448: (None, None)}


def test_a_probe_of_the_h100_records_its_slices_and_puts_processes_on_theirs():
    result = probed(H100)
    assert (result.status, result.error) == ("up", None)
    [gpu] = result.gpus
    assert (gpu.uuid, gpu.mig_enabled, gpu.utilization_gpu, gpu.memory_used_mib) == (
        GPU,
        True,
        None,
        11125,
    )
    assert [(s.uuid, s.mig_profile, s.mig_index, s.parent_uuid) for s in result.slices] == [
        (mig(0), "3g.40gb", 0, GPU),
        (mig(1), "2g.20gb", 1, GPU),
        (mig(2), "1g.10gb", 2, GPU),
        (mig(3), "1g.10gb", 3, GPU),
    ]
    first = result.slices[0]
    assert (first.index, first.name) == (0, "NVIDIA H100 80GB HBM3")
    assert (first.memory_total_mib, first.memory_used_mib) == (40448, 11091)
    # No utilisation, temperature or power per slice: nvidia-smi gives none.
    assert first.utilization_gpu is first.temperature_c is first.power_w is None
    # compute-apps names the GPU; the report's instance IDs put each process on its slice.
    assert {(p.pid, p.gpu_uuid) for p in result.processes} == {
        (21180, mig(0)),
        (21181, mig(0)),
        (21198, mig(0)),
    }
    assert [s["uuid"] for s in result.as_json()["slices"]] == [mig(n) for n in range(4)]


def test_compute_instances_sharing_a_gpu_instance_are_told_apart():
    result = probed(H200)
    assert [s.mig_profile for s in result.slices][:2] == ["1c.3g.71gb", "2c.3g.71gb"]
    # The load ran on compute instance 1 of GPU instance 2: MIG device 1, not device 0.
    assert {p.gpu_uuid for p in result.processes} == {mig(1)}


def test_without_the_list_nothing_is_known_of_the_slices():
    """nvidia-smi -L failed: the slices are unknown (None), not gone, and processes stay on
    the GPU the compute-apps query names."""
    result = probed(H100, list_rc=9)
    assert result.slices is None
    assert {p.gpu_uuid for p in result.processes} == {GPU}


def test_a_probe_over_ssh_records_the_slices_and_their_history(
    ssh_host, gpus, real_processes, client, owner
):
    me = pwd.getpwuid(os.getuid()).pw_name
    load = real_processes(["sleep", "302"])
    gpus("127.0.0.2").use_capture(H100, {21180: load.pid, 21181: 999998, 21198: 999999})
    result = probe_and_record(ssh_host)
    assert result.error is None
    gpu = Device.objects.get(parent=None)
    assert (gpu.uuid, gpu.mig_enabled, gpu.label) == (GPU, True, "0")
    slices = list(gpu.slices.order_by("mig_index"))
    assert [(s.uuid, s.mig_profile, s.memory_total_mib) for s in slices] == [
        (mig(0), "3g.40gb", 40448),
        (mig(1), "2g.20gb", 20096),
        (mig(2), "1g.10gb", 9984),
        (mig(3), "1g.10gb", 9984),
    ]
    assert [str(s) for s in slices][2] == "node-2:0.2 (1g.10gb)"
    assert list(Device.objects.all()) == [gpu, *slices]  # a GPU, then its slices
    [mine] = [p for p in result.processes if p.pid == load.pid]
    assert (mine.gpu_uuid, mine.user, mine.command) == (mig(0), me, "sleep 302")
    store_samples([(ssh_host, result)], timezone.now())
    used = dict(GpuMetric.objects.values_list("device__uuid", "memory_used_mib"))
    assert used == {GPU: 11125, mig(0): 11091, mig(1): 17, mig(2): 9, mig(3): 9}
    # The API lists each slice with its GPU and its latest memory, one page or one GPU.
    client.force_login(owner)
    listed = {d["uuid"]: d for d in client.get("/api/devices/").json()}
    one = client.get(f"/api/devices/{slices[3].pk}/").json()
    for row in (listed[mig(3)], one):
        assert (row["parent"], row["mig_profile"], row["mig_index"]) == (gpu.pk, "1g.10gb", 3)
        assert (row["latest"]["memory_used_mib"], row["mig_enabled"]) == (9, False)
    assert listed[GPU]["mig_enabled"] and listed[GPU]["parent"] is None
    # The same layout again changes nothing but the readings: a steady probe.
    host = Host.objects.get(pk=ssh_host.pk)
    assert record_steady_probes([(host, probe_host(host), 0.1)], timezone.now()) == []


def test_a_driver_without_mig_is_asked_again_without_it(db, tmp_path, monkeypatch):
    """Drivers before R450 refuse the mig.mode.current field: the probe asks for the
    readings alone, and the GPU has no MIG mode (None)."""
    fake_bin = Path(__file__).resolve().parents[1] / "fake_bin"
    monkeypatch.setenv("PATH", f"{fake_bin}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_GPU_DIR", str(tmp_path))
    fake = FakeGpus(tmp_path, "local")
    fake.write("query-gpu.csv", "0, GPU-old, 11441, 10, 0, 0, 35, 60.50, Tesla K80\n")
    fake.write("pre-mig", "")
    host = Host.objects.create(
        name="localhost", address="localhost", transport=Host.Transport.LOCAL
    )
    result = probe_and_record(host)
    assert result.error is None
    [gpu] = result.gpus
    assert (gpu.uuid, gpu.name, gpu.mig_enabled) == ("GPU-old", "Tesla K80", None)
    assert result.slices == []


def sample(uuid, parent=None, profile="", number=None, mig=None):
    return parsers.GpuSample(
        0,
        uuid,
        "NVIDIA A100-SXM4-40GB",
        40960,
        0,
        None,
        None,
        30,
        50.0,
        mig,
        parent,
        profile,
        number,
    )


def layout(*slices, mig=True) -> ProbeResult:
    return ProbeResult(
        "a100",
        True,
        "up",
        gpus=[sample("GPU-a", mig=mig)],
        slices=None if slices == (None,) else list(slices),
    )


def test_a_changed_mig_layout_is_a_changed_inventory(db):
    host = Host.objects.create(name="a100", address="10.0.0.9")
    record_probe(
        host, layout(sample("MIG-1", "GPU-a", "3g.20gb", 0), sample("MIG-2", "GPU-a", "3g.20gb", 1))
    )
    assert Device.objects.filter(status="present").count() == 3
    # Relaid as 7 x 1g.5gb (new instances, new UUIDs): the old slices are lost, kept for
    # their bookings and history; the new ones are created under the same GPU.
    sevens = layout(*[sample(f"MIG-x{n}", "GPU-a", "1g.5gb", n) for n in range(7)])
    host.refresh_from_db()
    assert record_steady_probes([(host, sevens, 0.1)], timezone.now()) == [(host, sevens, 0.1)]
    record_probe(host, sevens)
    lost = Device.objects.filter(status="lost")
    assert sorted(lost.values_list("uuid", flat=True)) == ["MIG-1", "MIG-2"]
    gpu = Device.objects.get(uuid="GPU-a")
    assert gpu.slices.filter(status="present", mig_profile="1g.5gb").count() == 7
    # -L failed this time: nothing is known of the slices, so none is marked lost.
    record_probe(host, layout(None))
    assert gpu.slices.filter(status="present").count() == 7
    # MIG turned off: every slice is gone, the GPU is whole again.
    record_probe(host, layout(mig=False))
    gpu.refresh_from_db()
    assert not gpu.mig_enabled and not gpu.slices.filter(status="present").exists()
    assert gpu.status == "present"
