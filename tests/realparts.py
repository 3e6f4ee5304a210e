"""Real parts the integration tests start: an unprivileged OpenSSH sshd and fake GPUs.

Where sshd (or screen) is not installed the tests skip with a reason; with
HIVE_REQUIRE_INTEGRATION=1 (set by .ci/run) those skips become failures.
"""

import contextlib
import csv
import importlib.util
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from monitoring import parsers

SSHD = "/usr/sbin/sshd"
FAKE_BIN = Path(__file__).parent / "fake_bin"
REQUIRED = os.environ.get("HIVE_REQUIRE_INTEGRATION") == "1"


def require(condition: bool, reason: str) -> None:
    """Skip (locally) or fail (in CI) when a real part is missing."""
    if condition:
        return
    if REQUIRED:
        pytest.fail(f"HIVE_REQUIRE_INTEGRATION=1 but {reason}")
    pytest.skip(reason)


def require_torch() -> None:
    """The distributed examples train for real: torch (CPU) is one of the real parts."""
    require(importlib.util.find_spec("torch") is not None, "torch is not installed")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Sshd:
    """An sshd listening on 127.0.0.1..N at one high port, with its own host key."""

    def __init__(self, workdir: Path, authorized_key: str, fake_gpu_dir: Path, addresses=3):
        self.workdir = workdir
        self.port = free_port()
        self.addresses = [f"127.0.0.{i}" for i in range(1, addresses + 1)]
        self.host_key = workdir / "ssh_host_ed25519_key"
        self.fake_gpu_dir = fake_gpu_dir
        workdir.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(self.host_key)], check=True
        )
        (workdir / "authorized_keys").write_text(authorized_key + "\n")
        self.config = workdir / "sshd_config"
        self.config.write_text(self._config())
        self.log = workdir / "sshd.log"
        self.proc = None

    def _config(self) -> str:
        listen = "\n".join(f"ListenAddress {a}:{self.port}" for a in self.addresses)
        path = f"{FAKE_BIN}:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"
        return f"""{listen}
HostKey {self.host_key}
PidFile {self.workdir}/sshd.pid
AuthorizedKeysFile {self.workdir}/authorized_keys .ssh/authorized_keys
UsePAM no
StrictModes no
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
PrintMotd no
MaxStartups 100
MaxSessions 100
SetEnv PATH={path} FAKE_GPU_DIR={self.fake_gpu_dir}
"""

    def start(self) -> "Sshd":
        if os.geteuid() == 0:
            Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
        self.proc = subprocess.Popen(
            [SSHD, "-D", "-e", "-f", str(self.config)],
            stderr=self.log.open("a"),
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"sshd exited: {self.log.read_text()}")
            try:
                socket.create_connection((self.addresses[0], self.port), timeout=0.5).close()
                return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("sshd did not start listening")

    def stop(self) -> None:
        """Stop the server and every connection it serves, as when a host goes down."""
        if self.proc and self.proc.poll() is None:
            # Each connection's sshd calls setsid(), so signal the children one by one.
            for pid in children(self.proc.pid):
                with contextlib.suppress(ProcessLookupError):  # it ended since we listed it
                    os.kill(pid, signal.SIGTERM)
            self.proc.terminate()
            self.proc.wait(timeout=10)

    def public_host_key(self) -> str:
        return (self.workdir / "ssh_host_ed25519_key.pub").read_text().split()[1]


def children(parent: int) -> list[int]:
    """The processes whose parent is ``parent``."""
    children = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            # the command name (2nd field) may hold spaces; fields after ")" are fixed
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == parent:
            children.append(int(stat.parent.name))
    return children


class FakeGpus:
    """Writes what the fake nvidia-smi prints for one host address."""

    def __init__(self, root: Path, address: str):
        """A plain host: what an earlier test left there (a MIG layout, an old driver) goes."""
        self.dir = root / address
        self.dir.mkdir(parents=True, exist_ok=True)
        self.set_mode("normal")
        self.set_processes([])
        for name in ("list.txt", "query.txt", "pre-mig"):
            (self.dir / name).unlink(missing_ok=True)

    def set_mode(self, mode: str) -> None:
        (self.dir / "mode").write_text(mode)

    def set_gpus(self, rows: list[str]) -> None:
        """Rows of the readings the tests give (parsers.GPU_QUERY_FIELDS), printed as
        nvidia-smi answers the probe's fields: with ``[N/A]`` for the MIG mode before the
        name, as GPUs without MIG (the tests' T4s, A100s outside MIG mode aside) print it."""
        lines = []
        for row in rows:
            *readings, name = row.split(",", len(parsers.GPU_QUERY_FIELDS) - 1)
            lines.append(",".join([*readings, " [N/A]", name]) + "\n")
        self.write("query-gpu.csv", "".join(lines))

    def set_probe_rows(self, rows: list[str]) -> None:
        """Rows with every field the probe asks (parsers.PROBE_GPU_FIELDS), as given."""
        self.write("query-gpu.csv", "".join(r + "\n" for r in rows))

    def set_processes(self, rows: list[str]) -> None:
        self.write("query-compute-apps.csv", "".join(r + "\n" for r in rows))

    def write(self, name: str, text: str) -> None:
        (self.dir / name).write_text(text)

    def use_capture(self, folder: Path, pids: dict[int, int] | None = None) -> None:
        """Print a real MIG machine's outputs (tests/fixtures/nvidia-smi-mig/<folder>): its
        -L and -q as they are, and its --query-gpu and --query-compute-apps answers in the
        probe's fields and format. ``pids`` replaces the capture's pids (processes of that
        machine) by real ones of this machine, for ps to find."""
        pids = pids or {}
        self.write("list.txt", (folder / "list.txt").read_text())
        report = (folder / "query-load.txt").read_text()
        for old, new in pids.items():
            report = re.sub(rf"(Process ID +: ){old}$", rf"\g<1>{new}", report, flags=re.M)
        self.write("query.txt", report)
        gpus = capture_rows(folder / "query-gpu-load.csv", parsers.PROBE_GPU_FIELDS)
        self.set_probe_rows(gpus)
        fields = ["gpu_uuid", "pid", "used_gpu_memory", "process_name"]
        apps = [a.split(", ", 3) for a in capture_rows(folder / "compute-apps-load.csv", fields)]
        self.set_processes(
            [", ".join([u, str(pids.get(int(p), p)), *rest]) for u, p, *rest in apps]
        )


def capture_rows(path: Path, fields: list[str]) -> list[str]:
    """The rows of a captured ``--format=csv`` answer (header, then values with units) as
    ``--format=csv,noheader,nounits`` prints ``fields`` of them."""
    header, *rows = list(csv.reader(path.read_text().splitlines(), skipinitialspace=True))
    columns = [name.split(" [")[0] for name in header]  # "memory.used [MiB]" -> memory.used
    answers = []
    for row in rows:
        values = dict(zip(columns, row, strict=True))
        answers.append(", ".join(_no_unit(values[f]) for f in fields))
    return answers


def _no_unit(value: str) -> str:
    """'81559 MiB' -> '81559', '433.78 W' -> '433.78'; other values as they are."""
    number, _, unit = value.partition(" ")
    return (
        number if unit in ("MiB", "W", "%", "MHz") and number.replace(".", "").isdigit() else value
    )


def sshd_available() -> bool:
    return Path(SSHD).exists() and shutil.which("ssh-keygen") is not None


def unix_account(sshd: Sshd, name: str, *useradd_options: str):
    """A real UNIX account (home, shell) whose ~/.ssh/authorized_keys holds the service key,
    as a lab member's would; recreated if left over. The test sshd runs as the tests' user:
    logging in as another account needs root."""
    import pwd

    require(os.geteuid() == 0 and shutil.which("useradd"), "creating UNIX accounts needs root")
    remove_unix_account(name)
    subprocess.run(
        ["useradd", *useradd_options, "-m", "-s", "/bin/sh", "-p", "*", name], check=True
    )
    account = pwd.getpwnam(name)
    ssh_dir = Path(account.pw_dir) / ".ssh"
    ssh_dir.mkdir(mode=0o700)
    shutil.copy(sshd.workdir / "authorized_keys", ssh_dir / "authorized_keys")
    for path in (ssh_dir, ssh_dir / "authorized_keys"):
        os.chown(path, account.pw_uid, account.pw_gid)
    return account


def remove_unix_account(name: str) -> None:
    subprocess.run(["pkill", "-KILL", "-u", name], capture_output=True, check=False)
    subprocess.run(["userdel", "-r", name], capture_output=True, check=False)
