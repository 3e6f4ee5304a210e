"""The probe's shell code under the two /bin/sh a GPU server has: dash (Debian, Ubuntu) and
bash (RHEL and its kin). It reads the GPU processes' pids, memory and df's last line with the
shell's own built-ins (monitoring/scripts/sample.sh), which the two must read alike."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from monitoring.models import Host
from monitoring.probes import PROBE_SCRIPT, SESSION_END, SESSION_SCRIPT, interpret
from tests.realparts import FakeGpus, require

FAKE_BIN = Path(__file__).resolve().parent.parent / "fake_bin"
UUIDS = ["GPU-10fb0fbd-2696-43f3-467f-d280d906a107", "GPU-d1df4664-bb44-189c-7ad0-ab86c8cb30e2"]
SHELLS = ["dash", "bash"]


@pytest.fixture
def local_gpus(tmp_path, real_processes):
    """Two fake GPUs on this machine ("local" to the fake nvidia-smi), with real processes on
    them, and the compute-apps lines nvidia-smi may print beside them."""
    first, second = (real_processes(["sleep", "300"]) for _ in range(2))
    fake = FakeGpus(tmp_path, "local")
    fake.set_gpus(
        [f"{i}, {u}, 40960, 1000, 37, 5, 41, 61.52, NVIDIA A100" for i, u in enumerate(UUIDS)]
    )
    fake.set_processes(
        [
            f"{UUIDS[0]}, {first.pid}, 2000, /usr/bin/python3, train.py",
            "",
            f"{UUIDS[1]},   {second.pid} , 17, spaces around the pid are not a pid",
            f"{UUIDS[1]},{second.pid}, 17, no space after the comma",
            f"{UUIDS[1]}, [N/A], 17, no pid",
        ]
    )
    env = dict(os.environ, FAKE_GPU_DIR=str(tmp_path), PATH=f"{FAKE_BIN}:{os.environ['PATH']}")
    env.pop("SSH_CONNECTION", None)
    return env, first.pid, second.pid


def this_machine() -> tuple[int, str]:
    """What /proc/cpuinfo says: the logical CPUs and the first model line's value."""
    lines = Path("/proc/cpuinfo").read_text().splitlines()
    count = sum(1 for line in lines if line.startswith("processor"))
    model = next(
        (line.partition(":")[2].strip() for line in lines if line.startswith("model name")), None
    )
    return count, model


def check(output: str, first: int, second: int, versions: bool = True) -> None:
    result = interpret(Host(name="local"), output)
    assert result.error is None, result.error
    assert [g.uuid for g in result.gpus] == UUIDS
    # ps was asked about the pids the shell read from the second fields: each has its command.
    commands = {p.pid: p.command for p in result.processes if p.pid in (first, second)}
    assert commands == {first: "sleep 300", second: "sleep 300"}
    assert (result.cpu["cores"], result.cpu["model"]) == this_machine()
    assert 0 < result.cpu["memory_used_mib"] < result.cpu["memory_total_mib"]
    assert result.cpu["utilization"] is not None
    assert [d.path for d in result.disks] == ["/"]  # a missing path is left out
    assert result.disks[0].total_mib > 0
    assert result.driver_version == ("535.104.05" if versions else None)


@pytest.mark.parametrize("shell", SHELLS)
def test_a_one_shot_probe_reads_alike_under_each_shell(shell, local_gpus):
    require(shutil.which(shell), f"{shell} is not installed")
    env, first, second = local_gpus
    argv = [shell, "-c", PROBE_SCRIPT, "probe", "1", "10", "/", "/no/such/path"]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=True)
    check(done.stdout, first, second)


@pytest.mark.parametrize("shell", SHELLS)
def test_a_probe_session_reads_alike_under_each_shell(shell, local_gpus):
    """Each sample, with versions asked or not, reports the same facts (the CPU count and
    model too, which the session reads at its start and when versions are asked)."""
    require(shutil.which(shell), f"{shell} is not installed")
    env, first, second = local_gpus
    argv = [shell, "-c", SESSION_SCRIPT, "probe-session", "10", "/", "/no/such/path"]
    loop = subprocess.run(
        argv, input="1\n0\n1\n", env=env, capture_output=True, text=True, timeout=60, check=True
    )
    samples = loop.stdout.split(SESSION_END + "\n")
    assert len(samples) == 4 and samples[-1] == ""
    for sample, versions in zip(samples, [True, False, True], strict=False):
        check(sample, first, second, versions)


@pytest.mark.parametrize("shell", SHELLS)
def test_samples_asked_back_to_back_each_measure_the_cpu(shell, local_gpus):
    """Samples asked at once follow each other within a few ms, often within one clock tick
    of /proc/stat (on a busy machine as on an idle one): each still reports a utilisation,
    measured over at least one tick."""
    require(shutil.which(shell), f"{shell} is not installed")
    env, first, second = local_gpus
    argv = [shell, "-c", SESSION_SCRIPT, "probe-session", "10", "/"]
    loop = subprocess.run(
        argv, input="0\n" * 20, env=env, capture_output=True, text=True, timeout=60, check=True
    )
    samples = loop.stdout.split(SESSION_END + "\n")[:-1]
    assert len(samples) == 20
    stats = [sample.split("@@stat\n")[1].splitlines()[:2] for sample in samples]
    assert all(before != after for before, after in stats)
    assert all(interpret(Host(name="local"), s).cpu["utilization"] is not None for s in samples)


@pytest.mark.parametrize("shell", SHELLS)
def test_a_procps_without_quick_pid_selection_is_asked_again_with_p(shell, local_gpus, tmp_path):
    """procps before 3.3.7 (RHEL 6) refuses `ps -q`: the probe asks again with `-p`, and sees
    the same processes."""
    require(shutil.which(shell), f"{shell} is not installed")
    env, first, second = local_gpus
    old_procps = tmp_path / "old-procps"
    old_procps.mkdir()
    ps = old_procps / "ps"
    ps.write_text(
        "#!/bin/sh\n"
        'for arg in "$@"; do\n'
        '  if [ "$arg" = -q ]; then echo "ERROR: Unsupported option (BSD syntax)" >&2; exit 1; fi\n'
        "done\n"
        f'exec {shutil.which("ps")} "$@"\n'
    )
    ps.chmod(0o755)
    env["PATH"] = f"{old_procps}:{env['PATH']}"
    argv = [shell, "-c", PROBE_SCRIPT, "probe", "1", "10", "/", "/no/such/path"]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=True)
    check(done.stdout, first, second)
    assert "Unsupported option" not in done.stdout + done.stderr


@pytest.mark.parametrize("shell", SHELLS)
def test_a_mig_layout_and_an_old_driver_read_alike_under_each_shell(shell, tmp_path):
    """The H100 MIG capture (tests/fixtures/nvidia-smi-mig): the shell sees the MIG mode and
    asks -L and -q; a driver before R450 refuses the MIG field and is asked without it."""
    require(shutil.which(shell), f"{shell} is not installed")
    capture = Path(__file__).resolve().parents[1] / "fixtures" / "nvidia-smi-mig" / "h100"
    fake = FakeGpus(tmp_path, "local")
    fake.use_capture(capture)
    env = dict(os.environ, FAKE_GPU_DIR=str(tmp_path), PATH=f"{FAKE_BIN}:{os.environ['PATH']}")
    env.pop("SSH_CONNECTION", None)
    argv = [shell, "-c", PROBE_SCRIPT, "probe", "0", "10", "/"]
    run = lambda: subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)  # noqa: E731
    result = interpret(Host(name="local"), run().stdout)
    assert result.error is None and len(result.slices) == 4
    assert {p.gpu_uuid for p in result.processes} == {result.slices[0].uuid}
    fake.write("query-gpu.csv", "0, GPU-old, 11441, 10, 0, 0, 35, 60.50, Tesla K80\n")
    fake.write("pre-mig", "")
    result = interpret(Host(name="local"), run().stdout)
    assert [(g.uuid, g.name, g.mig_enabled) for g in result.gpus] == [
        ("GPU-old", "Tesla K80", None)
    ]
    assert result.error is None and result.slices == []
