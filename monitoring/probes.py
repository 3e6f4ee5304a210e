"""Probing one host in one round trip: GPUs, GPU processes with their owners, driver and CUDA
versions, CPU (model, cores, load), RAM and the configured disks."""

import shlex
from dataclasses import dataclass, field

from django.conf import settings

from . import containers, hostscripts, parsers
from .connections import pool
from .models import Host
from .transport import CommandTimeout, HostKey, TransportError

# The nvidia-smi fields the probe asks (monitoring/scripts/sample.sh), in the order the
# parsers read them: assigned before the script, quoted (though they are plain names).
_FIELDS = (
    f"gpu_fields={shlex.quote(','.join(parsers.PROBE_GPU_FIELDS))}\n"
    f"old_gpu_fields={shlex.quote(','.join(parsers.GPU_QUERY_FIELDS))}\n"
    f"app_fields={shlex.quote(','.join(parsers.APP_QUERY_FIELDS))}\n"
)
# One probe in one round trip: `sh -c PROBE_SCRIPT probe VERSIONS TIMEOUT PATH...`.
PROBE_SCRIPT = _FIELDS + hostscripts.load("monitoring", "probe.sh")
# A probe session (see sessions.py): `sh -c SESSION_SCRIPT probe-session TIMEOUT PATH...`; it
# answers each line it reads ("1" asks for versions too) with one sample, closed by SESSION_END.
SESSION_SCRIPT = _FIELDS + hostscripts.load("monitoring", "probe-session.sh")
SESSION_END = "@@end"

NVIDIA_SMI_MISSING = "nvidia-smi not found: monitored as a CPU-only host"


@dataclass
class ProbeResult:
    """What one probe saw. ``gpus is None`` means "could not tell", not "no GPUs"."""

    host: str
    reachable: bool
    status: str
    error: str | None = None
    gpus: list[parsers.GpuSample] | None = None
    # The MIG slices of the GPUs (none where no GPU is in MIG mode; None: could not tell).
    slices: list[parsers.GpuSample] | None = None
    processes: list[parsers.GpuProcess] = field(default_factory=list)
    cpu: dict = field(default_factory=dict)
    disks: list[parsers.DiskUsage] = field(default_factory=list)
    driver_version: str | None = None
    cuda_version: str | None = None
    # Set at first contact with a host (trust on first use): recorded by record_probe.
    new_host_key: HostKey | None = None

    def as_json(self) -> dict:
        """The documented shape of `manage.py probe --json`."""
        return {
            "host": self.host,
            "reachable": self.reachable,
            "error": self.error,
            "gpus": [g.as_dict() for g in self.gpus or []],
            "slices": [s.as_dict() for s in self.slices or []],
            "processes": [p.as_dict() for p in self.processes],
            "cpu": {
                "utilization": self.cpu.get("utilization"),
                "memory_total_mib": self.cpu.get("memory_total_mib"),
                "memory_used_mib": self.cpu.get("memory_used_mib"),
                "model": self.cpu.get("model"),
                "cores": self.cpu.get("cores"),
            },
            "disks": [d.as_dict() for d in self.disks],
            "driver_version": self.driver_version,
            "cuda_version": self.cuda_version,
        }


def probe_argv(
    nvidia_smi_timeout: float, disk_paths: list[str] | None = None, versions: bool = True
) -> list[str]:
    """The probe as an argv list: the paths travel as arguments, quoted by the transport."""
    paths = settings.MONITORING_DISK_PATHS if disk_paths is None else disk_paths
    flag = "1" if versions else "0"
    return ["sh", "-c", PROBE_SCRIPT, "probe", flag, f"{nvidia_smi_timeout:g}", *paths]


def session_argv() -> list[str]:
    """The probe session as an argv list (see SESSION_SCRIPT)."""
    timeout = f"{settings.NVIDIA_SMI_TIMEOUT:g}"
    return ["sh", "-c", SESSION_SCRIPT, "probe-session", timeout, *settings.MONITORING_DISK_PATHS]


# scripts/containers.sh: `docker inspect` and `podman inspect`, 3 s each and 1 s to kill.
CONTAINER_INSPECTION_SECONDS = 2 * (3 + 1)


def probe_timeout() -> float:
    """How long one probe may take: up to six nvidia-smi calls (GPUs, processes, the MIG
    list and report, versions twice) may each run up to the timeout, plus their kill grace,
    and the container inspections theirs."""
    return 6 * settings.NVIDIA_SMI_TIMEOUT + 10 + CONTAINER_INSPECTION_SECONDS


def wants_versions(host: Host, force: bool = False) -> bool:
    """Versions change only with a driver upgrade, which reloads the driver (a host down or
    failing in between): asked when unknown, after any probe that was not UP, and on demand
    ("probe now"), not every interval."""
    known = host.hardware or {}
    return force or not known.get("driver_version") or host.status != Host.Status.UP


def probe_host(host: Host, force: bool = False) -> ProbeResult:
    """Probe one host; never raises for host-side problems (they land in the result)."""
    versions = wants_versions(host, force)
    return finish(host, _probe(host, force, versions), versions)


def finish(host: Host, result: ProbeResult, versions: bool) -> ProbeResult:
    """What every probe's result gets, whichever way it came: the known versions when they
    were not asked for, and the host key accepted at first contact."""
    if not versions:
        known = host.hardware or {}
        result.driver_version = known.get("driver_version")
        result.cuda_version = known.get("cuda_version")
    result.new_host_key = pool.take_first_contact_key(host)
    return result


def _probe(host: Host, force: bool, versions: bool) -> ProbeResult:
    try:
        argv = probe_argv(settings.NVIDIA_SMI_TIMEOUT, versions=versions)
        output = pool.run(host, argv, timeout=probe_timeout(), force=force).stdout
    except CommandTimeout as exc:
        return timed_out(host, str(exc))
    except TransportError as exc:
        return ProbeResult(host.name, False, exc.status, str(exc))
    return interpret(host, output)


def timed_out(host: Host, reason: str) -> ProbeResult:
    return ProbeResult(host.name, True, Host.Status.ERROR, f"probe timed out: {reason}")


def interpret(host: Host, output: str) -> ProbeResult:
    try:
        return _interpret(host.name, _sections(output), settings.NVIDIA_SMI_TIMEOUT)
    except parsers.ParseError as exc:
        return ProbeResult(host.name, True, Host.Status.ERROR, f"unexpected output: {exc}")


def _sections(output: str) -> dict[str, tuple[str, str]]:
    """{name: (argument on the marker line, body)} from the script's @@-separated output."""
    sections, name, arg, body = {}, None, "", []
    for line in output.splitlines():
        if line.startswith("@@"):
            if name:
                sections[name] = (arg, "\n".join(body))
            name, _, arg = line[2:].partition(" ")
            body = []
        else:
            body.append(line)
    if name:
        sections[name] = (arg, "\n".join(body))
    return sections


def _interpret(host_name: str, sections: dict, smi_timeout: float) -> ProbeResult:
    result = ProbeResult(host_name, True, Host.Status.UP, cpu=_cpu(sections))
    result.disks = parsers.parse_disks(sections.get("disks", ("", ""))[1])
    arg, text = sections.get("gpus", ("", ""))
    # The fields answered; probes from before the MIG mode was asked name none.
    rc, _, fields = arg.partition(" ")
    if rc == "0":
        result.gpus = parsers.parse_gpu_query(text, fields.split(",") if fields else None)
        result.slices, on_slice = _slices(result.gpus, sections)
        result.processes = _processes(sections, on_slice)
        versions = parsers.parse_driver_versions(sections.get("driver", ("", ""))[1])
        result.driver_version, result.cuda_version = versions
    elif rc == "127":
        result.gpus, result.error = [], NVIDIA_SMI_MISSING
    elif rc in ("124", "137"):
        result.status = Host.Status.ERROR
        result.error = f"nvidia-smi hung and was killed after {smi_timeout:g}s"
    else:
        result.status = Host.Status.ERROR
        first_line = text.strip().splitlines()[0] if text.strip() else "no output"
        result.error = f"nvidia-smi failed (exit {rc}): {first_line}"
    return result


def _slices(gpus: list[parsers.GpuSample], sections: dict) -> tuple[list | None, dict]:
    """The MIG slices (none when no GPU is in MIG mode; None when nvidia-smi -L failed, so
    nothing is known of them), and the processes the -q report puts on a slice."""
    if not any(gpu.mig_enabled for gpu in gpus):
        return [], {}
    rc, text = sections.get("mig-list", ("", ""))
    if rc != "0":
        return None, {}
    rc, report = sections.get("mig-query", ("", ""))
    query = parsers.parse_query_report(report) if rc == "0" else None
    return parsers.mig_slices(gpus, parsers.parse_mig_list(text), query)


def _processes(sections: dict, on_slice: dict) -> list[parsers.GpuProcess]:
    rc, text = sections.get("apps", ("", ""))
    if rc != "0":
        return []
    apps = parsers.parse_app_query(text)
    ps = parsers.parse_ps(sections.get("ps", ("", ""))[1])
    return _in_containers(parsers.join_processes(apps, ps, on_slice), ps, sections)


def _in_containers(processes, ps: dict, sections: dict) -> list[parsers.GpuProcess]:
    """The container of each process, and the owner of those in one (monitoring.containers)."""
    probe_container, cgroups = containers.parse_cgroups(sections.get("cgroups", ("", ""))[1])
    facts = containers.Facts(
        cgroups=cgroups,
        probe_container=probe_container,
        inspected=containers.parse_inspect(sections.get("containers", ("", ""))[1]),
        passwd=containers.parse_passwd(sections.get("passwd", ("", ""))[1]),
        label_key=settings.CONTAINER_OWNER_LABEL,
        first_personal_uid=settings.RUN_AS_MIN_UID,
    )
    for process in processes:
        entry = ps.get(process.pid) if process.pid is not None else None
        uid = entry.uid if entry else None
        process.user, process.container = containers.attribute(
            process.pid, uid, process.user, facts
        )
    return processes


def _cpu(sections: dict) -> dict:
    stat = sections.get("stat", ("", ""))[1].splitlines()
    utilization = parsers.parse_cpu_utilization(stat[0], stat[1]) if len(stat) >= 2 else None
    total, used = parsers.parse_meminfo(sections.get("meminfo", ("", ""))[1])
    model, cores = parsers.parse_cpuinfo(sections.get("cpuinfo", ("", ""))[1])
    return {
        "utilization": utilization,
        "memory_total_mib": total,
        "memory_used_mib": used,
        "model": model,
        "cores": cores,
    }
