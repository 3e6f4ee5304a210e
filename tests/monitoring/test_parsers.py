"""Parsers over real nvidia-smi outputs (../shared/fixtures) and hand-made edge cases."""

from pathlib import Path

import pytest

from monitoring import parsers
from monitoring.parsers import ParseError
from monitoring.probes import _interpret, _sections
from tests.realparts import require

FIXTURES = Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "nvidia-smi"


def fixture(prefix: str) -> str:
    require(FIXTURES.is_dir(), f"shared fixtures not found at {FIXTURES}")
    return next(FIXTURES.glob(f"{prefix}_*")).read_text()


def test_it_parses_the_gpustat_gpu_query_with_not_supported_values():
    fields = "index,uuid,name,temperature.gpu,utilization.gpu,memory.used,memory.total"
    gpus = parsers.parse_gpu_query(fixture("02"), fields.split(","))
    assert [g.index for g in gpus] == [0, 1, 2]
    assert gpus[0].name == "GeForce GTX TITAN X"
    assert gpus[0].uuid == "GPU-10fb0fbd-2696-43f3-467f-d280d906a107"
    assert (gpus[0].temperature_c, gpus[0].utilization_gpu) == (80, 76)
    assert (gpus[1].memory_used_mib, gpus[1].memory_total_mib) == (9000, 12287)
    assert gpus[2].utilization_gpu is None  # [Not Supported]
    assert gpus[0].power_w is None  # not queried


def test_it_parses_the_gpustat_app_query_with_a_not_supported_row():
    apps = parsers.parse_app_query(fixture("01"), ["gpu_uuid", "pid", "used_memory"])
    assert len(apps) == 6
    assert apps[0] == ("GPU-10fb0fbd-2696-43f3-467f-d280d906a107", 48448, 4000, "")
    assert apps[-1] == ("GPU-50205d95-57b6-f541-2bcb-86c09afed564", None, None, "")


@pytest.mark.parametrize(
    "value",
    ["[N/A]", "[Not Supported]", "[Insufficient Permissions]", "[Unknown Error]", "N/A", ""],
)
def test_it_turns_every_unsupported_marker_into_none(value):
    row = f"3, GPU-aaaa, 81559, 0, {value}, {value}, {value}, {value}, NVIDIA H100 80GB HBM3"
    gpu = parsers.parse_gpu_query(row)[0]
    assert gpu.utilization_gpu is gpu.utilization_memory is gpu.temperature_c is None
    assert gpu.power_w is None


def test_it_handles_two_digit_indices_and_commas_in_names():
    rows = "\n".join(
        f"{i}, GPU-{i:04d}, 16384, 1, 0, 0, 30, 25.10, Tesla V100-PCIE-16GB, rev. b"
        for i in range(16)
    )
    gpus = parsers.parse_gpu_query(rows + "\n")
    assert [g.index for g in gpus] == list(range(16))
    assert gpus[12].name == "Tesla V100-PCIE-16GB, rev. b"


def test_it_keeps_process_names_with_spaces_and_commas():
    text = "GPU-1, 4242, 512, /opt/my app/bin/python train.py --a=1,2\n"
    assert parsers.parse_app_query(text) == [
        ("GPU-1", 4242, 512, "/opt/my app/bin/python train.py --a=1,2")
    ]


def test_an_empty_process_list_is_no_processes():
    assert parsers.parse_app_query("") == []
    assert parsers.parse_app_query("\n") == []


def test_mig_process_rows_name_the_parent_gpu():
    gpus = parsers.parse_gpu_query(
        "0, GPU-5e1c, 81559, 11000, [N/A], [N/A], 33, 72.4, NVIDIA H100 80GB HBM3\n"
    )
    apps = parsers.parse_app_query(
        "GPU-5e1c, 100, 5000, python\nGPU-5e1c, 101, [Insufficient Permissions], python\n"
    )
    processes = parsers.join_processes(apps, {})
    assert {p.gpu_uuid for p in processes} == {gpus[0].uuid}
    assert processes[1].memory_mib is None
    assert gpus[0].utilization_gpu is None


def test_it_rejects_output_with_the_wrong_shape():
    with pytest.raises(ParseError):
        parsers.parse_gpu_query("0, GPU-1, 100\n")
    with pytest.raises(ParseError):
        parsers.parse_gpu_query("zero, GPU-1, 1, 1, 1, 1, 1, 1, name\n")
    with pytest.raises(ParseError):
        parsers.parse_app_query("GPU-1\n")


def test_ps_keeps_long_user_names_and_full_commands():
    text = "  4242  1001 gpuhive-longname-user python train.py --lr 0.1\n 99  5000 5000 sleep 10\n"
    ps = parsers.parse_ps(text)
    assert ps[4242].user == "gpuhive-longname-user"
    assert ps[4242].command == "python train.py --lr 0.1"
    assert ps[99].user == "5000"  # no name for the uid: printed as the number


def test_a_process_ps_cannot_see_has_an_unknown_owner():
    apps = [("GPU-1", 7, 10, "python"), ("GPU-1", None, None, "")]
    processes = parsers.join_processes(apps, {})
    assert [p.user for p in processes] == [None, None]
    assert processes[0].command == "python"


def test_cpu_utilization_is_busy_time_between_two_samples():
    first = "cpu  100 0 100 700 100 0 0 0 0 0"
    second = "cpu  150 0 150 750 150 0 0 0 0 0"
    # busy 100 of 200 ticks; iowait counts as idle
    assert parsers.parse_cpu_utilization(first, second) == 50.0
    assert parsers.parse_cpu_utilization(first, first) is None


def test_meminfo_used_is_total_minus_available():
    text = "MemTotal:       24684228 kB\nMemAvailable:   20000000 kB\n"
    assert parsers.parse_meminfo(text) == (24105, 4574)


def probe_output(gpus_rc="0", gpus="", apps="", ps=""):
    return (
        f"@@gpus {gpus_rc}\n{gpus}\n@@apps 0\n{apps}\n@@ps\n{ps}\n"
        "@@stat\ncpu  1 0 1 8 0 0 0 0 0 0\ncpu  2 0 2 16 0 0 0 0 0 0\n"
        "@@driver\nNVIDIA-SMI version  : 535.104.05\nNVML version        : 535.104\n"
        "DRIVER version      : 535.104.05\nCUDA Version        : 12.2\n"
        "@@meminfo\nMemTotal: 2048 kB\nMemAvailable: 1024 kB\n"
        "@@cpuinfo\n16\nmodel name\t: AMD EPYC 7302 16-Core Processor\n"
        "@@disks\n/\n/dev/sda1 102400 51200 51200 50% /\n"
    )


def test_a_probe_joins_gpu_processes_with_their_owners():
    out = probe_output(
        gpus="0, GPU-1, 100, 50, 1, 2, 3, 4.5, Tesla T4",
        apps="GPU-1, 77, 50, python",
        ps="77 1000 alice python -m train",
    )
    result = _interpret("n", _sections(out), 10)
    assert result.as_json()["processes"] == [
        {
            "gpu_uuid": "GPU-1",
            "pid": 77,
            "user": "alice",
            "command": "python -m train",
            "memory_mib": 50,
            "container": None,
        }
    ]
    assert result.as_json()["cpu"] == {
        "utilization": 20.0,
        "memory_total_mib": 2,
        "memory_used_mib": 1,
        "model": "AMD EPYC 7302 16-Core Processor",
        "cores": 16,
    }
    assert result.as_json()["disks"] == [{"path": "/", "total_mib": 100, "used_mib": 50}]
    assert (result.driver_version, result.cuda_version) == ("535.104.05", "12.2")


@pytest.mark.parametrize(
    ("rc", "status", "message"),
    [
        ("124", "error", "nvidia-smi hung"),
        ("9", "error", "nvidia-smi failed (exit 9): NVIDIA-SMI has failed"),
        ("127", "up", "CPU-only"),
    ],
)
def test_a_probe_explains_a_failing_nvidia_smi(rc, status, message):
    out = probe_output(gpus_rc=rc, gpus="NVIDIA-SMI has failed because it couldn't talk")
    result = _interpret("n", _sections(out), 10)
    assert result.status == status
    assert message in result.error
    # "could not tell" (None) must not be confused with "no GPUs" ([]): only the
    # latter marks GPUs lost.
    assert result.gpus == ([] if rc == "127" else None)


def test_driver_versions_come_from_either_version_report():
    modern = "NVIDIA-SMI version  : 550.54.14\nNVML version        : 550.54\n"
    modern += "DRIVER version      : 550.54.14\nCUDA Version        : 12.4\n"
    assert parsers.parse_driver_versions(modern) == ("550.54.14", "12.4")
    # Older drivers: "Invalid combination..." for --version, then the -q report's header.
    old = (
        "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n\n"
        "==============NVSMI LOG==============\n\n"
        "Timestamp                                 : Mon Jun  5 12:00:00 2023\n"
        "Driver Version                            : 515.105.01\n"
        "CUDA Version                              : 11.7\n\n"
        "Attached GPUs                             : 1\nGPU 00000000:00:1E.0\n"
        "    Compute Mode                          : Default\n"
    )
    assert parsers.parse_driver_versions(old) == ("515.105.01", "11.7")
    assert parsers.parse_driver_versions("") == (None, None)
    assert parsers.parse_driver_versions("CUDA Version : N/A\n") == (None, None)


def test_cpuinfo_gives_model_and_logical_cpu_count():
    assert parsers.parse_cpuinfo("8\nmodel name\t: Intel(R) Xeon(R) Gold 6230 CPU") == (
        "Intel(R) Xeon(R) Gold 6230 CPU",
        8,
    )
    # ARM boards without a "model name" line print nothing there
    assert parsers.parse_cpuinfo("4\n") == (None, 4)
    assert parsers.parse_cpuinfo("") == (None, None)


def test_disks_pair_each_path_with_its_df_line():
    text = (
        "/\n/dev/nvme0n1p2 490617784 123456789 342148575 27% /\n"
        "/data sets\n/dev/sdb1 1048576 1024 1047552 1% /data sets\n"
        "/refused\n\n"  # df refused it: left out
    )
    assert [d.as_dict() for d in parsers.parse_disks(text)] == [
        {"path": "/", "total_mib": 479118, "used_mib": 120563},
        {"path": "/data sets", "total_mib": 1024, "used_mib": 1},
    ]
