"""Parsers for what hosts print: nvidia-smi queries, ps, /proc/stat, /proc/meminfo, /proc/cpuinfo
and df.

Pure functions over text, so they are tested against real captured outputs. Values a GPU
cannot report (``[N/A]``, ``[Not Supported]``, ``[Insufficient Permissions]``, ...) become
``None``, never a string.
"""

import re
from dataclasses import dataclass

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


def parse_gpu_query(text: str, fields: list[str] = GPU_QUERY_FIELDS) -> list[GpuSample]:
    """Output of ``nvidia-smi --query-gpu=<fields> --format=csv,noheader,nounits``.

    Fields the query did not ask for are ``None``.
    """
    gpus = []
    for row in _records(text, fields):
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
            )
        )
    return gpus


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


def join_processes(apps, ps: dict[int, PsEntry]) -> list[GpuProcess]:
    """GPU processes with owners and full command lines from ps.

    A PID that ps cannot see (a process in another PID namespace, e.g. a container) keeps
    ``user=None``: its owner is unknown, and we do not guess.
    """
    processes = []
    for uuid, pid, memory, name in apps:
        entry = ps.get(pid) if pid is not None else None
        processes.append(
            GpuProcess(
                gpu_uuid=uuid,
                pid=pid,
                user=entry.user if entry else None,
                command=entry.command if entry and entry.command else name,
                memory_mib=memory,
            )
        )
    return processes


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
