"""The probe's parsing over a real H100's outputs (tests/fixtures/nvidia-smi-h100, where
SOURCES.md says how each was taken): our probe script and probe session as they ran there,
and nvidia-smi's own reports."""

from pathlib import Path

from monitoring import parsers
from monitoring.probes import SESSION_END, _interpret, _sections

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nvidia-smi-h100"
UUID = "GPU-9bf8f37d-8434-3abb-f14f-7e4ada9fb568"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def probed(output: str):
    return _interpret("h100", _sections(output), 10)


def test_the_probe_reads_the_h100_its_process_and_the_machine():
    result = probed(fixture("probe-output.txt"))
    assert (result.status, result.error) == ("up", None)
    [gpu] = result.gpus
    assert (gpu.index, gpu.uuid, gpu.name) == (0, UUID, "NVIDIA H100 80GB HBM3")
    assert (gpu.memory_total_mib, gpu.memory_used_mib) == (81559, 1643)
    assert (gpu.utilization_gpu, gpu.utilization_memory, gpu.temperature_c) == (98, 100, 39)
    assert gpu.power_w == 272.25
    [process] = result.as_json()["processes"]
    assert (process["gpu_uuid"], process["pid"], process["user"]) == (UUID, 448, "root")
    assert process["memory_mib"] == 1634
    assert process["command"].startswith("python3 -c  import time, torch")
    assert (result.driver_version, result.cuda_version) == ("580.159.04", "13.0")
    cpu = result.as_json()["cpu"]
    assert (cpu["cores"], cpu["model"]) == (16, "Intel(R) Xeon(R) Processor")
    assert cpu["memory_total_mib"] == 131981020 // 1024
    assert 0 <= cpu["utilization"] <= 100
    assert [d.path for d in result.disks] == ["/", "/home"]


def test_the_probe_with_ps_q_reads_the_h100s_process():
    """The same probe after ps -q replaced ps -p (procps-ng 4.0.4 there), taken on a later
    machine of the same kind: the process is found and its owner and command are read."""
    result = probed(fixture("probe-output-ps-q.txt"))
    assert (result.status, result.error) == ("up", None)
    [gpu] = result.gpus
    [process] = result.as_json()["processes"]
    assert (process["gpu_uuid"], process["pid"], process["user"]) == (gpu.uuid, 28734, "root")
    assert (process["memory_mib"], gpu.memory_used_mib) == (630, 639)
    assert process["command"].startswith("python3 -c import torch,time;")
    assert (result.driver_version, result.cuda_version) == ("580.159.04", "13.0")
    assert [d.path for d in result.disks] == ["/"]


def test_the_probe_session_answers_each_line_with_a_whole_sample():
    samples = fixture("session-output.txt").split(f"\n{SESSION_END}\n")
    assert samples[-1] == ""  # each sample is closed by the end marker
    first, second = (probed(sample) for sample in samples[:-1])
    assert [g.uuid for g in first.gpus] == [g.uuid for g in second.gpus] == [UUID]
    assert [p.pid for p in first.processes] == [p.pid for p in second.processes] == [448]
    assert first.driver_version == "580.159.04"
    assert second.driver_version is None  # the line "0" asked for no versions


def test_nvidia_smis_own_queries_and_reports_parse():
    [gpu] = parsers.parse_gpu_query(fixture("query-gpu.csv"))
    assert (gpu.uuid, gpu.memory_total_mib, gpu.power_w) == (UUID, 81559, 195.01)
    apps = parsers.parse_app_query(fixture("query-compute-apps.csv"))
    assert apps == [(UUID, 448, 1634, "python3")]
    # No process: the query prints nothing at all, which is no process, not an error.
    ended = fixture("versions-mig.txt").split("== nvidia-smi (no process)\n")[1]
    output, _, status = ended.partition("rc ")
    assert (output, status.split()[0]) == ("", "0")
    assert parsers.parse_app_query(output) == []
    # Versions from --version, from the -q -d COMPUTE header (older drivers) and from -q.
    versions = fixture("versions-mig.txt")
    modern, compute = versions.split("== nvidia-smi -q -d COMPUTE\n")
    assert parsers.parse_driver_versions(modern) == ("580.159.04", "13.0")
    assert parsers.parse_driver_versions(compute.split("== nvidia-smi mig")[0]) == (
        "580.159.04",
        "13.0",
    )
    assert parsers.parse_driver_versions(fixture("nvidia-smi-q.txt")) == ("580.159.04", "13.0")
