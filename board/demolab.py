"""The demo lab's hosts, simulated inside the service's own processes, so `manage.py demo`
lives beside `serve` without sshd, GPUs or root.

A demo host's address ends in ``.demo.invalid`` (a name that can never resolve, RFC 2606);
``monitoring.connections`` asks ``transport_for`` before it would connect, and every caller
(the probing loop and its sessions, task starts and syncs, log reads, doctor, gpurun) gets a
``DemoTransport``. It answers the service's own commands as a host would: probes print what
the probe script prints, and that text goes through the real parsers; tasks run, log and end
as the screen windows would. Nothing is executed.

What a host shows is a function of the time and the service's database, so every process of
the service sees the same lab without sharing anything else:
- the lab's shape (hosts, GPUs, the faulty host, the intruder, the people it made) is in
  ``HIVE_DATA_DIR/demo-lab.json``, written by `manage.py demo` and removed by ``--remove``;
- each GPU's user changes every ``SLOT_SECONDS``: someone of the lab on a free GPU about half
  the time (each host's last GPU is left to bookings and jobs), the booking's owner on a
  booked one (mostly: booked GPUs sit idle too), the owner's account on the GPUs of a running
  task; readings vary every second;
- a task runs ``EPOCH_SECONDS`` per ``--epochs N`` of its command (``sleep N``: N seconds;
  else 10 epochs), logs a line per epoch and exits 0 (``exit N``: N); a signalled task (its
  row has ``stop_requested_at``) ends a second later with 143;
- one person of the lab runs a process on a GPU of someone else's booking: an intruder that
  protection finds.
"""

import base64
import hashlib
import json
import os
import random
import re
import select
import time
from datetime import UTC, datetime
from pathlib import Path

from django.conf import settings
from django.utils import timezone

from jobs import remote
from jobs.models import Task
from monitoring import doctor
from monitoring.models import Host
from monitoring.parsers import DiskUsage, GpuProcess, GpuSample
from monitoring.probes import PROBE_SCRIPT, SESSION_END, SESSION_SCRIPT, ProbeResult
from monitoring.transport import (
    CommandResult,
    HostKey,
    SSHTarget,
    TransportError,
    check_command,
    refuse_in_request,
)
from reservations.models import ReservedDevice

DOMAIN = "demo.invalid"
MONITORING_ACCOUNT = "gpuhive-demo"  # a name no lab's person has: jobs refuse it
PEOPLE = ["ada", "grace", "linus", "barbara", "alan", "margaret", "dennis", "frances"]
MODELS = [
    ("NVIDIA A100-SXM4-80GB", 81920, 400),
    ("NVIDIA RTX A6000", 49140, 300),
    ("NVIDIA H100 80GB HBM3", 81559, 700),
    ("NVIDIA GeForce RTX 3090", 24576, 350),
]
COMMANDS = [
    "python train.py --config exp.yaml",
    "python -m torch.distributed.run --nproc_per_node 1 finetune.py",
    "python eval.py --checkpoint best.pt",
    "/opt/conda/bin/python -m ipykernel_launcher -f kernel.json",
]
INTRUDER_COMMAND = "python grab_a_gpu.py --steps 100000"
FAULT = "Unable to determine the device handle for GPU0000:3B:00.0: Unknown Error"
SLOT_SECONDS = 600
EPOCH_SECONDS = 30
DEFAULT_EPOCHS = 10
TERMINATED = 143  # what a shell reports for a command ended by SIGTERM
DISK_KB = 1_945_600_000
MEMORY_KB = 527_360_000


def address(name: str) -> str:
    return f"{name}.{DOMAIN}"


def is_demo(host: Host) -> bool:
    return host.address.endswith(f".{DOMAIN}")


# --- the lab's shape, one file beside the database ---------------------------------------


def lab_file() -> Path:
    return Path(settings.HIVE_DATA_DIR) / "demo-lab.json"


def write_lab(lab: dict) -> None:
    path = lab_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_suffix(".part")
    part.write_text(json.dumps(lab, indent=1))
    part.replace(path)  # readers in other processes see the old file or the new, never half


_read_cache: dict[str, tuple[tuple, dict]] = {}


def read_lab() -> dict | None:
    """The lab's shape, or None without a demo; read again only when the file changed (each
    write makes a new file: a new inode)."""
    path = lab_file()
    try:
        stat = path.stat()
        version = (stat.st_ino, stat.st_mtime_ns)
        cached = _read_cache.get(str(path))
        if cached is None or cached[0] != version:
            _read_cache[str(path)] = cached = (version, json.loads(path.read_text()))
        return cached[1]
    except (OSError, ValueError):
        return None


def remove_lab() -> None:
    lab_file().unlink(missing_ok=True)


# --- what a host shows at a moment ---------------------------------------------------------


def uuid(host_no: int, index: int) -> str:
    return f"GPU-demo-{host_no:03d}-{index}"


def uid_of(user: str) -> int:
    return 1001 + PEOPLE.index(user) if user in PEOPLE else 2000 + sum(map(ord, user)) % 1000


def reading(name: str, spec: dict, at: float, booked=None, tasks=(), intruder=None) -> ProbeResult:
    """Host ``name`` (its ``spec`` from the lab file) at epoch second ``at``. ``booked``:
    {GPU index: account of the booking's owner}; ``tasks``: (pid, account, command, GPU
    indexes) of the tasks running there; ``intruder``: (GPU index, account)."""
    booked = booked or {}
    busy = {
        i: (pid + 1 + n, user, command)
        for pid, user, command, gpus in tasks
        for n, i in enumerate(gpus)
    }
    gpus, processes = [], []
    for index in range(spec["gpus"]):
        owner = booked.get(index)
        # The lab leaves each host's last GPU to bookings and jobs: somewhere to start one.
        spare = owner is None and index == spec["gpus"] - 1 and spec["gpus"] > 1
        process = busy.get(index) or (None if spare else occupant(name, index, at, owner))
        intruded = intruder is not None and intruder[0] == index
        gpus.append(gpu(name, spec, index, at, process is not None or intruded))
        if process:
            processes.append(GpuProcess(gpus[-1].uuid, *process, gpus[-1].memory_used_mib))
    if intruder and intruder[0] < len(gpus):
        index, user = intruder
        processes.append(GpuProcess(gpus[index].uuid, 4242, user, INTRUDER_COMMAND, 2048))
    return ProbeResult(
        name,
        True,
        Host.Status.UP,
        gpus=gpus,
        processes=processes,
        cpu=cpu(name, at),
        disks=[disk(name)],
        driver_version="550.54.15",
        cuda_version="12.4",
    )


def occupant(name: str, index: int, at: float, owner: str | None):
    """(pid, user, command) of whoever uses the GPU in this slot, or None: a booking's owner
    mostly uses it, and anyone of the lab may take a free one about half the time."""
    rng = random.Random(f"{name}:{index}:{int(at // SLOT_SECONDS)}")  # noqa: S311 (demo)
    if owner:
        user = owner if rng.random() < 0.85 else None
    else:
        user = rng.choice(PEOPLE) if rng.random() < 0.5 else None
    if user is None:
        return None
    return 1000 + rng.randrange(90_000), user, rng.choice(COMMANDS)


def gpu(name: str, spec: dict, index: int, at: float, used: bool) -> GpuSample:
    model, memory, power = MODELS[spec["no"] % len(MODELS)]
    slot = random.Random(f"{name}:{index}:{int(at // SLOT_SECONDS)}:load")  # noqa: S311
    now = random.Random(f"{name}:{index}:{int(at)}")  # noqa: S311 (varies every second)
    if used:
        util = min(100, max(0, slot.randint(55, 97) + now.randint(-8, 8)))
        mem = min(memory, slot.randint(memory // 4, memory - 1500) + now.randint(-200, 200))
    else:
        util, mem = now.randint(0, 2), now.randint(0, 4)
    return GpuSample(
        index=index,
        uuid=uuid(spec["no"], index),
        name=model,
        memory_total_mib=memory,
        memory_used_mib=mem,
        utilization_gpu=util,
        utilization_memory=util // 2,
        temperature_c=32 + util // 2,
        power_w=round(power * (0.15 + 0.8 * util / 100), 2),
    )


def cpu(name: str, at: float) -> dict:
    rng = random.Random(f"{name}:cpu:{int(at)}")  # noqa: S311
    return {
        "utilization": float(rng.randint(5, 85)),
        "memory_total_mib": MEMORY_KB // 1024,
        "memory_used_mib": rng.randint(40_000, 400_000),
        "model": "AMD EPYC 7763 64-Core Processor",
        "cores": 128,
    }


def disk(name: str) -> DiskUsage:
    used = random.Random(f"{name}:disk").randint(200_000_000, 1_800_000_000)  # noqa: S311
    return DiskUsage("/", DISK_KB // 1024, used // 1024)


# --- the text the probe script prints ------------------------------------------------------


def probe_text(result: ProbeResult, versions: bool, disks: list[str], fault: bool) -> str:
    """What monitoring/scripts/sample.sh prints for this reading (up to its "@@stat" section)."""
    if fault:
        lines = ["@@gpus 9", FAULT]
    else:
        lines = ["@@gpus 0", *map(gpu_row, result.gpus), "@@apps 0"]
        lines += [
            f"{p.gpu_uuid}, {p.pid}, {p.memory_mib}, {p.command.split()[0]}"
            for p in result.processes
        ]
        lines += [
            "@@ps",
            *(f"{p.pid} {uid_of(p.user)} {p.user} {p.command}" for p in result.processes),
        ]
        if versions:
            lines += [
                "@@driver",
                f"DRIVER version : {result.driver_version}",
                f"CUDA Version : {result.cuda_version}",
            ]
    used_kb = result.cpu["memory_used_mib"] * 1024
    lines += [
        "@@meminfo",
        f"MemTotal: {MEMORY_KB} kB",
        f"MemAvailable: {MEMORY_KB - used_kb} kB",
        "@@cpuinfo",
        str(result.cpu["cores"]),
        f"model name\t: {result.cpu['model']}",
        "@@disks",
    ]
    for path in disks:
        used = result.disks[0].used_mib * 1024
        lines += [path, f"/dev/nvme0n1p2 {DISK_KB} {used} {DISK_KB - used} 50% /"]
    return "\n".join(lines) + "\n"


def gpu_row(g: GpuSample) -> str:
    return (
        f"{g.index}, {g.uuid}, {g.memory_total_mib}, {g.memory_used_mib}, "
        f"{g.utilization_gpu}, {g.utilization_memory}, {g.temperature_c}, "
        f"{g.power_w:.2f}, {g.name}"
    )


def stat_lines(utilization: float) -> str:
    """Two /proc/stat "cpu" lines 1000 ticks apart with this share busy."""
    busy = round(utilization * 10)
    return f"cpu  1000000 0 0 1000000 0 0 0 0\ncpu  {1000000 + busy} 0 0 {1001000 - busy} 0 0 0 0"


# --- the service's database as the lab's people read it ----------------------------------


def live_reading(host_id: int, name: str, spec: dict, lab: dict) -> ProbeResult:
    """The host now: its booked GPUs used by their owners, its tasks' processes."""
    now = timezone.now()
    slots = ReservedDevice.objects.filter(
        holds=True, start__lte=now, end__gt=now, device__host_id=host_id
    ).values_list(
        "device__index",
        "reservation__owner__username",
        "reservation__owner__profile__unix_username",
    )
    booked = {index: unix or user for index, user, unix in slots}
    tasks = [
        (task.pid, task.unix_username, task.command, [d.index for d in task.devices.all()])
        for task in running_tasks(host_id)
        if ended(task, now.timestamp()) is None
    ]
    intruder = lab.get("intruder", {})
    spot = (intruder["gpu"], intruder["user"]) if intruder.get("host") == name else None
    return reading(name, spec, now.timestamp(), booked, tasks, spot)


def running_tasks(host_id: int) -> list[Task]:
    return list(
        Task.objects.filter(host_id=host_id, status__in=Task.ACTIVE)
        .exclude(pid=None)
        .prefetch_related("devices")
    )


def task_named(host_id: int, name: str) -> Task | None:
    return Task.objects.filter(host_id=host_id, screen_session=name).order_by("-pk").first()


def task_pid(task: Task) -> int:
    return 20_000 + task.pk % 40_000


def planned_seconds(command: str) -> tuple[float, int]:
    """(how long the command runs, its exit code), read from the command."""
    code = re.search(r"\bexit\s+(\d+)", command)
    sleep = re.search(r"\bsleep\s+(\d+(?:\.\d+)?)", command)
    epochs = re.search(r"--epochs[ =](\d+)", command)
    seconds = (
        float(sleep[1])
        if sleep
        else int(epochs[1]) * EPOCH_SECONDS
        if epochs
        else DEFAULT_EPOCHS * EPOCH_SECONDS
    )
    return seconds, int(code[1]) % 256 if code else 0


def ended(task: Task, at: float) -> tuple[int, float] | None:
    """(exit code, epoch second it ended) if the task has ended by ``at``; None if it runs."""
    if task.started_at is None:
        return None
    seconds, code = planned_seconds(task.command)
    end = task.started_at.timestamp() + seconds
    if task.stop_requested_at is not None and task.stop_requested_at.timestamp() + 1 < end:
        end, code = task.stop_requested_at.timestamp() + 1, TERMINATED
    return (code, end) if end <= at else None


def log_text(task: Task, at: float) -> bytes:
    """The task's log: a line per epoch done, and the end."""
    if task.started_at is None or re.search(r"\bsleep\s", task.command):
        return b""
    seconds, code = planned_seconds(task.command)
    total = max(1, round(seconds / EPOCH_SECONDS))
    done = min(total, int((at - task.started_at.timestamp()) // EPOCH_SECONDS))
    rng = random.Random(task.pk)  # noqa: S311 (demo figures)
    lines, loss = [f"training for {total} epochs on {task.host.name}"], 2.5
    for epoch in range(1, done + 1):
        loss *= rng.uniform(0.9, 0.99)
        lines.append(f"epoch {epoch}/{total}  loss {loss:.4f}  acc {1 - loss / 3:.3f}")
    if (end := ended(task, at)) is not None:
        lines.append("done" if end[0] == 0 else f"stopped (exit {end[0]})")
    return ("\n".join(lines) + "\n").encode()


def iso(at: float) -> str:
    return f"{datetime.fromtimestamp(at, UTC):%Y-%m-%dT%H:%M:%SZ}"


# --- the transport -------------------------------------------------------------------------


def transport_for(host: Host):
    """A DemoTransport for a demo host (registered in monitoring.connections), else None."""
    return DemoTransport(host) if is_demo(host) else None


def host_key(name: str) -> HostKey:
    """A fixed ed25519 public key per demo host, so it is recorded as a real one would be."""
    blob = b"\0\0\0\x0bssh-ed25519\0\0\0\x20" + hashlib.sha256(name.encode()).digest()
    digest = base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")
    return HostKey("ssh-ed25519", base64.b64encode(blob).decode(), f"SHA256:{digest}")


class DemoTransport:
    """A demo host, as a transport: run() and start() answer the service's own commands."""

    def __init__(self, host: Host):
        self.host_id, self.name, self.account = host.pk, host.name, host.username
        # Trust on first use, as with SSH: the connection pool hands the key to the caller.
        self.target = SSHTarget(host.address, host.port, host.username, "")
        if not host.host_key:
            self.target.first_contact_key = host_key(host.name)

    def spec(self) -> tuple[dict, dict]:
        lab = read_lab()
        spec = (lab or {}).get("hosts", {}).get(self.name)
        if spec is None:
            raise TransportError(
                f"{self.name} is a demo host, but the demo lab's file ({lab_file()}) does not "
                "list it: remove the demo with `manage.py demo --remove`"
            )
        return lab, spec

    def sample(self, versions: bool, disks: list[str]) -> str:
        lab, spec = self.spec()
        result = live_reading(self.host_id, self.name, spec, lab)
        text = probe_text(result, versions, disks, spec.get("fault", False))
        return text + f"@@stat\n{stat_lines(result.cpu['utilization'])}\n"

    def run(self, argv: list[str], timeout: float, stdin: str | None = None) -> CommandResult:
        refuse_in_request(argv)
        check_command(argv)
        if argv[:3] == ["sh", "-c", remote.UID_FLOOR]:
            argv = argv[5:]  # the demo's people all have UIDs above any floor
        out, status = self.answer(argv, timeout)
        return CommandResult(argv, status, out, "" if status == 0 else f"{argv[0]} failed")

    def answer(self, argv: list[str], timeout: float) -> tuple[str, int]:
        script = argv[2] if argv[:2] == ["sh", "-c"] and len(argv) > 2 else None
        if script == PROBE_SCRIPT:
            return self.sample(argv[4] == "1", argv[6:]), 0
        if script in JOB_SCRIPTS:
            return getattr(self, JOB_SCRIPTS[script])(argv[4:], timeout)
        simple = {"id": (f"{self.account}\n", 0), "who": ("", 0), "true": ("", 0)}
        if argv[0] in simple:
            return simple[argv[0]]
        if script == doctor.HAS_TOOL:  # the tools the service runs there
            return f"/usr/bin/{argv[4]}\n", 0
        if argv[0] == "python3" and argv[2:] == [remote.FREE_PORT]:
            return f"{29500 + self.host_id % 1000}\n", 0
        if argv[0] == "timeout" and "nvidia-smi" in argv:  # gpurun: the GPUs' processes now
            return self.apps(), 0
        if argv[:3] == ["ps", "-o", "stat=,user:64="]:
            return self.process_owner(int(argv[-1]))
        raise TransportError(
            f"{self.name} is a simulated demo host: it runs only the service's own commands, "
            f"not {argv[0]!r}"
        )

    def apps(self) -> str:
        lab, spec = self.spec()
        result = live_reading(self.host_id, self.name, spec, lab)
        rows = [
            f"{p.gpu_uuid}, {p.pid}, {p.memory_mib}, {p.command.split()[0]}"
            for p in result.processes
        ]
        return "".join(f"{row}\n" for row in rows)

    def process_owner(self, pid: int) -> tuple[str, int]:
        lab, spec = self.spec()
        result = live_reading(self.host_id, self.name, spec, lab)
        users = [p.user for p in result.processes if p.pid == pid]
        return (f"S    {users[0]}\n", 0) if users else ("", 1)

    def start(self, argv: list[str]):
        refuse_in_request(argv)
        check_command(argv)
        if argv[:3] != ["sh", "-c", SESSION_SCRIPT]:
            raise TransportError(f"{self.name} is a simulated demo host: {argv[0]!r} cannot run")
        self.spec()  # a host the lab's file does not list says so here, as a probe's error
        disks = argv[5:]
        return SessionChannel(lambda versions: self.sample(versions, disks))

    def close(self) -> None:
        pass

    # The scripts of jobs.remote, by what they are given after `sh -c SCRIPT sh`.

    def spawn(self, args: list[str], timeout: float) -> tuple[str, int]:
        log_dir, name = args[0], args[1]
        task = task_named(self.host_id, name)
        if task is None:
            return "", 3
        return f"{task_pid(task)} {self.log_path(log_dir, name)}\n", 0

    def log_path(self, log_dir: str, name: str) -> str:
        home = f"/home/{self.account}/"
        return (
            f"{log_dir.replace('~/', home, 1) if log_dir.startswith('~/') else log_dir}/{name}.log"
        )

    def started(self, args: list[str], timeout: float) -> tuple[str, int]:
        task = task_named(self.host_id, args[1])
        pid = task_pid(task) if task and task.started_at else ""
        return f"{pid} {self.log_path(args[0], args[1])}\n", 0

    def sync(self, args: list[str], timeout: float) -> tuple[str, int]:
        now, alive, exits = time.time(), [], []
        for name in args[1:]:
            task = task_named(self.host_id, name)
            end = ended(task, now) if task else None
            if task and task.pid and end is None:
                alive.append(f"\t{task.pid}.{name}\t(Detached)")
            elif end is not None:
                exits.append(f"{name} {end[0]} {iso(end[1])}")
        listing = ["There are screens on:", *alive] if alive else ["No Sockets found."]
        return "\n".join([*listing, "--exit files--", *exits]) + "\n", 0

    def wait_exit(self, args: list[str], timeout: float) -> tuple[str, int]:
        name, seconds, then = args[1], float(args[2]), args[4:]
        task = task_named(self.host_id, name)
        if task is None:
            return "", 0
        end = ended(task, time.time())
        before = end is not None
        if not before:
            finish = task.started_at.timestamp() + planned_seconds(task.command)[0]
            time.sleep(max(0.0, min(finish - time.time(), seconds, timeout - 1)))
            task.refresh_from_db()
            end = ended(task, time.time())
        if end is None:
            return "", 0
        out = f"{end[0]} {iso(end[1])}\n" if before else f"{end[0]}\n"
        if then:
            then_out, status = self.answer(then, timeout)
            out += f"--then--\n{then_out}--then-status {status}\n"
        return out, 0

    def signal(self, args: list[str], timeout: float) -> tuple[str, int]:
        return "", 0  # the row's stop_requested_at, set next, ends the task (see ``ended``)

    def read_logs(self, args: list[str], timeout: float) -> tuple[str, int]:
        keep, limit, pairs = int(args[0]), int(args[1]), args[2:]
        tasks = {
            t.log_path: t
            for t in Task.objects.filter(host_id=self.host_id, log_path__in=pairs[0::2])
        }
        out, now = [], time.time()
        for path, offset in zip(pairs[0::2], pairs[1::2], strict=False):
            if path not in tasks:
                out.append("@@ -")
                continue
            data = log_text(tasks[path], now)
            start = int(offset) if int(offset) <= len(data) else 0
            start = max(start, len(data) - keep)
            out += [
                f"@@ {len(data)} {start}",
                base64.b64encode(data[start : start + limit]).decode(),
            ]
        return "\n".join(out) + "\n", 0


JOB_SCRIPTS = {
    remote.SPAWN: "spawn",
    remote.STARTED: "started",
    remote.SYNC: "sync",
    remote.WAIT_EXIT: "wait_exit",
    remote.SIGNAL: "signal",
    remote.READ_LOGS: "read_logs",
}


class SessionChannel:
    """A probe session's channel, as far as monitoring.sessions uses one: each question
    ("0" or "1" and a line break) is answered at once into a pipe, which the probing loop's
    selector watches like a socket."""

    def __init__(self, answer):
        self.answer = answer
        self.read_fd, self.write_fd = os.pipe()
        self.closed = self.eof_received = False

    def fileno(self) -> int:
        return self.read_fd

    def sendall(self, data: bytes) -> None:
        if self.closed:
            raise OSError("the session was closed")
        for line in data.decode().split():
            try:
                text = f"{self.answer(line == '1')}{SESSION_END}\n".encode()
            except TransportError as exc:  # as a connection that broke: the loop starts anew
                raise OSError(str(exc)) from None
            while text:
                text = text[os.write(self.write_fd, text) :]

    def recv_ready(self) -> bool:
        if self.closed:
            return False
        poller = select.poll()  # not select(): descriptors may be numbered above 1024
        poller.register(self.read_fd, select.POLLIN)
        return bool(poller.poll(0))

    def recv(self, size: int) -> bytes:
        return os.read(self.read_fd, size)

    def recv_stderr_ready(self) -> bool:
        return False

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            os.close(self.read_fd)
            os.close(self.write_fd)
