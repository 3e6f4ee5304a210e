"""Parsers for what hosts print: nvidia-smi queries, lists and reports, ps, /proc/stat,
/proc/meminfo, /proc/cpuinfo and df.

Pure functions over text, so they are tested against real captured outputs. Values a GPU
cannot report (``[N/A]``, ``[Not Supported]``, ``[Insufficient Permissions]``, ...) become
``None``, never a string.
"""

import re
from dataclasses import dataclass, field

# Order matters: the free-text field (name) goes last so a comma inside it cannot shift
# the columns before it.
GPU_QUERY_FIELDS = [
    "index",
    "uuid",
    "memory.total",
    "memory.used",
    "utilization.gpu",
    "utilization.memory",
    "temperature.gpu",
    "power.draw",
    "name",
]
# What the probe asks of each GPU: the readings and the MIG mode (the name still last).
# Drivers before R450 know no MIG and refuse the field; the probe then asks GPU_QUERY_FIELDS.
PROBE_GPU_FIELDS = [*GPU_QUERY_FIELDS[:-1], "mig.mode.current", "name"]
APP_QUERY_FIELDS = ["gpu_uuid", "pid", "used_memory", "process_name"]


class ParseError(ValueError):
    """Output that does not look like what the command prints."""


@dataclass
class GpuSample:
    index: int
    uuid: str
    name: str
    memory_total_mib: int | None
    memory_used_mib: int | None
    utilization_gpu: int | None
    utilization_memory: int | None
    temperature_c: int | None
    power_w: float | None
    # A GPU: whether MIG is on (None: the GPU or driver has no MIG). A MIG slice (see
    # mig_slices): its GPU's UUID, its profile and its MIG device number there.
    mig_enabled: bool | None = None
    parent_uuid: str | None = None
    mig_profile: str = ""
    mig_index: int | None = None

    def as_dict(self):
        return dict(vars(self))  # flat values: asdict's result, without its deep copy


@dataclass
class GpuProcess:
    gpu_uuid: str
    pid: int | None
    user: str | None
    command: str
    memory_mib: int | None
    # The container it runs in ({"id", "name", "runtime"}), None outside one: set by
    # monitoring.containers, which also decides ``user`` for such a process.
    container: dict | None = None

    def as_dict(self):
        return dict(vars(self))  # flat values: asdict's result, without its deep copy


@dataclass
class PsEntry:
    pid: int
    uid: int
    user: str
    command: str


def _unsupported(value: str) -> bool:
    # nvidia-smi brackets every "cannot tell" answer: [N/A], [Not Supported], ...
    return value == "" or value == "N/A" or (value.startswith("[") and value.endswith("]"))


def _number(value: str, kind=int):
    value = value.strip()
    if _unsupported(value):
        return None
    try:
        number = float(value)
    except ValueError:
        raise ParseError(f"not a number: {value!r}") from None
    return kind(round(number)) if kind is int else number


def _records(text: str, fields: list[str]) -> list[dict[str, str]]:
    """CSV rows as {field: text}. Only the last field may contain commas."""
    records = []
    for line in text.splitlines():
        if not line.strip():
            continue
        cells = [c.strip() for c in line.split(",", len(fields) - 1)]
        if len(cells) != len(fields):
            raise ParseError(f"expected {len(fields)} columns, got {len(cells)}: {line!r}")
        records.append(dict(zip(fields, cells, strict=True)))
    return records


def parse_gpu_query(text: str, fields: list[str] | None = None) -> list[GpuSample]:
    """Output of ``nvidia-smi --query-gpu=<fields> --format=csv,noheader,nounits``
    (default: GPU_QUERY_FIELDS).

    Fields the query did not ask for are ``None``.
    """
    gpus = []
    for row in _records(text, fields or GPU_QUERY_FIELDS):
        index, uuid = _number(row.get("index", "")), row.get("uuid", "")
        if index is None or _unsupported(uuid):
            raise ParseError(f"GPU row without index or UUID: {row}")
        gpus.append(
            GpuSample(
                index=index,
                uuid=uuid,
                name=row.get("name", ""),
                memory_total_mib=_number(row.get("memory.total", "")),
                memory_used_mib=_number(row.get("memory.used", "")),
                utilization_gpu=_number(row.get("utilization.gpu", "")),
                utilization_memory=_number(row.get("utilization.memory", "")),
                temperature_c=_number(row.get("temperature.gpu", "")),
                power_w=_number(row.get("power.draw", ""), float),
                mig_enabled=_mig_mode(row.get("mig.mode.current", "")),
            )
        )
    return gpus


def _mig_mode(value: str) -> bool | None:
    """``Enabled``/``Disabled``; GPUs without MIG answer ``[N/A]``."""
    return None if _unsupported(value) else value.strip().lower() == "enabled"


def parse_app_query(text: str, fields: list[str] = APP_QUERY_FIELDS) -> list[tuple]:
    """Output of ``nvidia-smi --query-compute-apps=<fields> --format=csv,noheader,nounits``.

    Returns (gpu_uuid, pid, used_memory_mib, process_name) rows; empty output means no
    process. PID or memory may be None ([Not Supported], [Insufficient Permissions]).
    """
    apps = []
    for row in _records(text, fields):
        name = row.get("process_name", "")
        apps.append(
            (
                row["gpu_uuid"],
                _number(row.get("pid", "")),
                _number(row.get("used_memory", "")),
                "" if _unsupported(name) else name,
            )
        )
    return apps


def parse_ps(text: str) -> dict[int, PsEntry]:
    """Output of ``ps -ww -o pid=,uid=,user:64=,args= -q PIDS`` (or ``-p``), keyed by PID."""
    entries = {}
    for line in text.splitlines():
        parts = line.split(None, 3)
        if len(parts) < 3:
            continue
        pid, uid, user = parts[:3]
        if not (pid.isdigit() and uid.isdigit()):
            raise ParseError(f"unexpected ps line: {line!r}")
        # A user name ps cannot resolve is printed as the numeric uid.
        entries[int(pid)] = PsEntry(int(pid), int(uid), user, parts[3] if len(parts) > 3 else "")
    return entries


def join_processes(
    apps, ps: dict[int, PsEntry], on_slice: dict[tuple[str, int], str] | None = None
) -> list[GpuProcess]:
    """GPU processes with owners and full command lines from ps.

    A PID that ps cannot see (a process in another PID namespace, e.g. a container) keeps
    ``user=None``: its owner is unknown, and we do not guess. ``on_slice`` (from mig_slices)
    puts a process on the MIG slice it runs on: (GPU UUID, pid) -> the slice's UUID.
    """
    on_slice = on_slice or {}
    processes = []
    for uuid, pid, memory, name in apps:
        entry = ps.get(pid) if pid is not None else None
        processes.append(
            GpuProcess(
                gpu_uuid=on_slice.get((uuid, pid), uuid),
                pid=pid,
                user=entry.user if entry else None,
                command=entry.command if entry and entry.command else name,
                memory_mib=memory,
            )
        )
    return processes


# --- MIG -------------------------------------------------------------------------------------
# A MIG slice is named only by `nvidia-smi -L` (profile and MIG- UUID, under its GPU); its
# memory, and which processes run on it, only by `nvidia-smi -q` (by MIG device number and
# GPU/compute instance IDs). `--query-compute-apps` names the parent GPU. No output gives a
# slice's utilisation. See tests/fixtures/nvidia-smi-mig/README.md.

_LIST_GPU = re.compile(r"^GPU \d+: .*\(UUID: (?P<uuid>[^)\s]+)\)\s*$")
# "  MIG 3g.40gb     Device  0: (UUID: MIG-...)"; drivers before R470 print MIG-GPU-.../1/0.
_LIST_MIG = re.compile(
    r"^\s+MIG (?P<profile>\S+)\s+Device\s+(?P<index>\d+): \(UUID: (?P<uuid>[^)\s]+)\)\s*$"
)


def parse_mig_list(text: str) -> dict[str, list[tuple[int, str, str]]]:
    """GPU UUID -> its MIG devices as (MIG device number, profile, MIG UUID), from
    ``nvidia-smi -L``. A GPU without MIG devices has an empty list."""
    listing: dict[str, list[tuple[int, str, str]]] = {}
    gpu = None
    for line in text.splitlines():
        if found := _LIST_GPU.match(line):
            gpu = listing.setdefault(found["uuid"], [])
        elif found := _LIST_MIG.match(line):
            if gpu is None:
                raise ParseError(f"MIG device before any GPU: {line!r}")
            gpu.append((int(found["index"]), found["profile"], found["uuid"]))
        elif line.strip():
            raise ParseError(f"not an nvidia-smi -L line: {line!r}")
    return listing


@dataclass
class QueryReport:
    """What ``nvidia-smi -q`` says about MIG, per GPU UUID: each MIG device's
    {"gpu_instance", "compute_instance", "memory_total_mib", "memory_used_mib"} by its
    number, and each process's (GPU instance, compute instance) by pid."""

    mig_devices: dict[str, dict[int, dict]] = field(default_factory=dict)
    processes: dict[str, dict[int, tuple[int | None, int | None]]] = field(default_factory=dict)


def parse_query_report(text: str) -> QueryReport:
    """The MIG parts of ``nvidia-smi -q``: its "key : value" lines, nested by indentation
    under titles ("GPU 00000000:00:09.0", "MIG Device", "Shared FB Memory Usage",
    "Processes"). A GPU's UUID comes after its MIG devices, so each GPU is read whole."""
    report = QueryReport()
    for gpu in _gpu_blocks(text):
        uuid = gpu.pop("uuid", None)
        if uuid is None:
            raise ParseError("a GPU of nvidia-smi -q without a GPU UUID")
        report.mig_devices[uuid] = gpu["mig"]
        report.processes[uuid] = gpu["processes"]
    return report


def _gpu_blocks(text: str) -> list[dict]:
    blocks: list[dict] = []
    titles: list[tuple[int, str]] = []  # the titles the current line is under
    for line in text.splitlines():
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip(" "))
        while titles and titles[-1][0] >= indent:
            titles.pop()
        key, sep, value = line.strip().partition(" : ")
        key = key.strip()
        if not sep:
            titles.append((indent, key))
            _open(blocks, [t for _, t in titles])
        elif blocks and titles and titles[0][1] == blocks[-1]["title"]:
            _read(blocks[-1], [t for _, t in titles[1:]], key, value.strip())
    return blocks


def _open(blocks: list[dict], path: list[str]) -> None:
    """A title opens a GPU (at the top) or one of its MIG devices."""
    if len(path) == 1 and re.match(r"^GPU [0-9A-Fa-f]+:[0-9A-Fa-f]+:", path[0]):
        blocks.append({"title": path[0], "mig": {}, "processes": {}, "device": None})
    elif blocks and path[1:] == ["MIG Device"] and path[0] == blocks[-1]["title"]:
        blocks[-1]["device"] = {}


def _read(gpu: dict, path: list[str], key: str, value: str) -> None:
    if not path and key == "GPU UUID":
        gpu["uuid"] = value
    elif path and path[0] == "MIG Device" and gpu["device"] is not None:
        _read_mig_device(gpu, path[1:], key, value)
    elif path == ["Processes"]:
        _read_process(gpu, key, value)


def _read_mig_device(gpu: dict, path: list[str], key: str, value: str) -> None:
    device = gpu["device"]
    if not path and key == "Index":
        gpu["mig"][_number(value)] = device
    elif not path and key in ("GPU Instance ID", "Compute Instance ID"):
        device["gpu_instance" if key.startswith("GPU") else "compute_instance"] = _number(value)
    elif path and path[0].endswith("FB Memory Usage") and key in ("Total", "Used"):
        device[f"memory_{key.lower()}_mib"] = _mebibytes(value)


def _read_process(gpu: dict, key: str, value: str) -> None:
    """Each process is "GPU instance ID", "Compute instance ID", "Process ID", then its
    type, name and memory (read from --query-compute-apps, not here)."""
    if key == "GPU instance ID":
        gpu["instance"] = (_number(value), None)
    elif key == "Compute instance ID" and "instance" in gpu:
        gpu["instance"] = (gpu["instance"][0], _number(value))
    elif key == "Process ID" and "instance" in gpu and (pid := _number(value)) is not None:
        gpu["processes"][pid] = gpu.pop("instance")


def _mebibytes(value: str) -> int | None:
    """'40448 MiB' -> 40448."""
    number, _, unit = value.partition(" ")
    if unit not in ("MiB", ""):
        raise ParseError(f"not a size in MiB: {value!r}")
    return _number(number)


def mig_slices(
    gpus: list[GpuSample], listing: dict, report: QueryReport | None
) -> tuple[list[GpuSample], dict[tuple[str, int], str]]:
    """The MIG slices of ``gpus`` as samples (memory from ``report``, when there is one;
    no utilisation, temperature or power: nvidia-smi gives none per slice), and
    (GPU UUID, pid) -> slice UUID for the processes ``report`` puts on a slice."""
    slices, on_slice = [], {}
    report = report or QueryReport()
    for gpu in gpus:
        devices = report.mig_devices.get(gpu.uuid, {})
        by_instances = {}
        for number, profile, uuid in listing.get(gpu.uuid, []):
            device = devices.get(number, {})
            slices.append(_slice(gpu, number, profile, uuid, device))
            if device.get("gpu_instance") is not None:
                by_instances[device["gpu_instance"], device.get("compute_instance")] = uuid
        for pid, instances in report.processes.get(gpu.uuid, {}).items():
            if instances in by_instances:
                on_slice[gpu.uuid, pid] = by_instances[instances]
    return slices, on_slice


def _slice(gpu: GpuSample, number: int, profile: str, uuid: str, device: dict) -> GpuSample:
    return GpuSample(
        index=gpu.index,
        uuid=uuid,
        name=gpu.name,
        memory_total_mib=device.get("memory_total_mib"),
        memory_used_mib=device.get("memory_used_mib"),
        utilization_gpu=None,
        utilization_memory=None,
        temperature_c=None,
        power_w=None,
        parent_uuid=gpu.uuid,
        mig_profile=profile,
        mig_index=number,
    )


def parse_cpu_utilization(first: str, second: str) -> float | None:
    """Busy percentage between two ``cpu`` lines of /proc/stat."""
    a, b = _cpu_times(first), _cpu_times(second)
    total = sum(b) - sum(a)
    if total <= 0:
        return None
    # idle + iowait count as not busy
    idle = (b[3] + b[4]) - (a[3] + a[4])
    return round(100.0 * (total - idle) / total, 1)


def _cpu_times(line: str) -> list[int]:
    parts = line.split()
    if not parts or parts[0] != "cpu" or len(parts) < 6:
        raise ParseError(f"not a /proc/stat cpu line: {line!r}")
    # guest time is already included in user time; count each tick once
    return [int(x) for x in parts[1:9]]


def parse_meminfo(text: str) -> tuple[int | None, int | None]:
    """(total MiB, used MiB) from /proc/meminfo; used = total - available."""
    values = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        fields = rest.split()
        if fields and fields[0].isdigit():
            values[key] = int(fields[0])
    total = values.get("MemTotal")
    available = values.get("MemAvailable")
    if total is None:
        return None, None
    used = total - available if available is not None else None
    return total // 1024, (used // 1024 if used is not None else None)


def parse_driver_versions(text: str) -> tuple[str | None, str | None]:
    """(driver version, CUDA version) from ``nvidia-smi --version`` or ``nvidia-smi -q``.

    Recent drivers print ``DRIVER version : 535.104.05`` and ``CUDA Version : 12.2`` for
    ``--version``; older ones refuse that flag, and the ``-q`` report's header carries the
    same two lines as ``Driver Version`` and ``CUDA Version``. Either form is read here.
    """
    found = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        key = " ".join(key.split()).lower()
        if sep and key in ("driver version", "cuda version") and key not in found:
            value = value.strip()
            found[key] = None if _unsupported(value) else value
    return found.get("driver version"), found.get("cuda version")


def parse_cpuinfo(text: str) -> tuple[str | None, int | None]:
    """(CPU model, logical CPU count) from the probe's two cpuinfo lines.

    The first line is ``grep -c ^processor /proc/cpuinfo``; the second the first
    ``model name`` (x86) or ``Hardware``/``Processor``/``cpu model`` (ARM, MIPS) line.
    """
    lines = text.splitlines()
    count = int(lines[0]) if lines and lines[0].strip().isdigit() else None
    model = lines[1].partition(":")[2].strip() if len(lines) > 1 else ""
    return (model or None), (count or None)


@dataclass
class DiskUsage:
    path: str
    total_mib: int
    used_mib: int

    def as_dict(self):
        return dict(vars(self))  # flat values: asdict's result, without its deep copy


# A line of ``df -P -k``: file system, 1024-blocks, used, available, capacity%, mount point.
_DF_LINE = re.compile(r"^(?P<fs>.*?)\s+(?P<total>\d+)\s+(?P<used>\d+)\s+(?P<free>\d+)\s+\S+\s+/")


def parse_disks(text: str) -> list[DiskUsage]:
    """Usage of the configured paths: pairs of lines, the path, then its ``df -P -k`` line.

    A path whose df line is missing or garbled (df refused it) is left out.
    """
    lines = text.splitlines()
    disks = []
    for path, line in zip(lines[0::2], lines[1::2], strict=False):
        match = _DF_LINE.match(line)
        if match:
            total, used = int(match["total"]), int(match["used"])
            disks.append(DiskUsage(path=path, total_mib=total // 1024, used_mib=used // 1024))
    return disks
