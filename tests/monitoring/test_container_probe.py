"""The probe names the container and owner of a GPU process in a real Podman container.

A real rootful Podman container (a `sleep` from a root file system of this machine's own
binaries, so no image is pulled) is the GPU process the fake nvidia-smi reports; the probe
reads its /proc/PID/cgroup and asks `podman inspect` for its owner label, as on a lab's
server. It needs Podman and root; where either is missing, or Podman cannot start a
container here, it skips saying why. CI does not install Podman, so the skip stays a skip
under HIVE_REQUIRE_INTEGRATION=1: the parsing and the shell's reading are tested on real
captures everywhere (test_containers.py), this test where a lab-like machine allows.
"""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from monitoring.containers import owner_text
from monitoring.models import Host
from monitoring.probes import PROBE_SCRIPT, SESSION_END, SESSION_SCRIPT, interpret
from tests.realparts import FAKE_BIN, FakeGpus

UUID = "GPU-10fb0fbd-2696-43f3-467f-d280d906a107"
# Limits a container may have without CAP_SYS_RESOURCE (Podman's defaults raise them).
LIMITS = ["--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024"]


def root_filesystem(folder: Path) -> Path:
    """`sleep` and the libraries it links, laid out as a container's root."""
    binary = shutil.which("sleep")
    linked = subprocess.run(["ldd", binary], capture_output=True, text=True, check=True).stdout
    files = [binary] + [part for part in linked.split() if part.startswith("/")]
    for name in files:
        target = folder / name.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(name, target)
    for empty in ("proc", "sys", "dev", "etc", "tmp"):
        (folder / empty).mkdir(exist_ok=True)
    return folder


class Podman:
    """Starts containers with `podman run --rootfs` and removes them all afterwards."""

    def __init__(self, rootfs: Path, runtime: list[str]):
        self.rootfs, self.runtime, self.names = rootfs, runtime, []

    def run(self, name: str, *labels: str) -> subprocess.CompletedProcess:
        options = [arg for label in labels for arg in ("--label", label)]
        argv = ["podman", *self.runtime, "run", "-d", *LIMITS, *options, "--name", name]
        self.names.append(name)
        sleep = shutil.which("sleep")
        return subprocess.run(
            [*argv, "--rootfs", str(self.rootfs), sleep, "300"],
            capture_output=True,
            text=True,
            timeout=120,
        )

    def pid(self, name: str) -> int:
        argv = ["podman", "inspect", "--format", "{{.State.Pid}}", name]
        return int(subprocess.run(argv, capture_output=True, text=True, check=True).stdout)

    def remove(self) -> None:
        for name in self.names:
            argv = ["podman", "rm", "-f", "-t", "0", name]
            subprocess.run(argv, capture_output=True, timeout=120)


@pytest.fixture
def podman(tmp_path):
    if not shutil.which("podman"):
        pytest.skip("podman is not installed (apt-get install podman)")
    if os.geteuid() != 0:
        pytest.skip("rootful Podman containers need root")
    rootfs = root_filesystem(tmp_path / "rootfs")
    # crun refuses hybrid cgroup v1 hosts that runc accepts: the first runtime that starts one.
    runtimes = [[]] + ([["--runtime", "runc"]] if shutil.which("runc") else [])
    errors = []
    for runtime in runtimes:
        engine = Podman(rootfs, runtime)
        started = engine.run(f"gpuhive-probe-{os.getpid()}-check")
        engine.remove()
        if started.returncode == 0:
            engine.names = []
            yield engine
            engine.remove()
            return
        errors.append(started.stderr.strip().splitlines()[-1] if started.stderr.strip() else "?")
    pytest.skip(f"Podman cannot start a container here: {'; '.join(errors)}")


def test_the_probe_names_a_containers_owner_from_its_label(podman, tmp_path, real_processes):
    labelled, unlabelled = (f"gpuhive-probe-{os.getpid()}-{n}" for n in ("train-3", "eval"))
    assert podman.run(labelled, "gpuhive.owner=alice", "org.example.note=x y").returncode == 0
    assert podman.run(unlabelled).returncode == 0
    on_host = real_processes(["sleep", "303"])
    pids = {podman.pid(labelled): labelled, podman.pid(unlabelled): unlabelled}
    fake = FakeGpus(tmp_path / "gpus", "local")
    fake.set_gpus([f"0, {UUID}, 40960, 4000, 90, 5, 41, 61.52, NVIDIA A100"])
    fake.set_processes([f"{UUID}, {pid}, 2000, sleep" for pid in [*pids, on_host.pid]])
    env = dict(os.environ, FAKE_GPU_DIR=str(tmp_path / "gpus"))
    env["PATH"] = f"{FAKE_BIN}:{env['PATH']}"
    env.pop("SSH_CONNECTION", None)
    outputs = []
    for shell in ("dash", "bash"):
        argv = [shell, "-c", PROBE_SCRIPT, "probe", "0", "20", "/"]
        outputs.append(subprocess.run(argv, env=env, capture_output=True, text=True).stdout)
        argv = [shell, "-c", SESSION_SCRIPT, "probe-session", "20", "/"]
        loop = subprocess.run(argv, input="0\n", env=env, capture_output=True, text=True)
        outputs.append(loop.stdout.split(SESSION_END)[0])
    for output in outputs:
        result = interpret(Host(name="local"), output)
        assert result.error is None, result.error
        by_pid = {p.pid: p for p in result.processes}
        alice, nobody = (by_pid[pid] for pid in pids)
        assert (alice.user, alice.container["name"], alice.container["runtime"]) == (
            "alice",
            labelled,
            "podman",
        )
        assert len(alice.container["id"]) == 12
        # Without a label, a container's root is nobody we can name: never "root".
        assert nobody.user is None
        assert owner_text(nobody.as_dict()) == f"container {unlabelled} (owner unknown)"
        # The process outside any container keeps ps's owner.
        assert by_pid[on_host.pid].container is None
        assert by_pid[on_host.pid].user == "root"
