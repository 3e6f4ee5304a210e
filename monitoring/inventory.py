"""Keeping hosts and devices in step with what probes see."""

from django.db import transaction
from django.utils import timezone

from .bulk import update_many
from .models import Device, Host
from .probes import ProbeResult, probe_host
from .transport import HostKey


def probe_and_record(host: Host, force: bool = False) -> ProbeResult:
    result = probe_host(host, force=force)
    record_probe(host, result)
    return result


# The host's fields a probe writes.
PROBE_FIELDS = [
    "status",
    "last_probe_at",
    "last_error",
    "last_snapshot",
    "last_seen",
    "last_probe_seconds",
    "hardware",
]


@transaction.atomic
def record_probe(host: Host, result: ProbeResult, seconds: float | None = None) -> None:
    """Store the probe on the host and sync its GPUs (only when nvidia-smi answered).

    ``seconds`` is how long the probe took (the loop measures it for /metrics).
    """
    now = timezone.now()
    apply_probe(host, result, seconds, now)
    if result.new_host_key:
        record_host_key(host, result.new_host_key)
    host.save(update_fields=PROBE_FIELDS)
    if result.gpus is not None:
        sync_devices(host, result, now)


def apply_probe(host: Host, result: ProbeResult, seconds: float | None, now) -> None:
    """Set the probe's fields on the host (not saved)."""
    host.last_probe_seconds = seconds
    host.status = result.status
    host.last_probe_at = now
    host.last_error = result.error or ""
    host.last_snapshot = result.as_json()
    if result.reachable:
        host.last_seen = now
        host.hardware = hardware_facts(result, host.hardware or {}, now)


def record_steady_probes(probed: list[tuple[Host, ProbeResult, float]], now) -> list:
    """Store a cycle's probes in bulk where nothing but the readings changed; returns the
    others (a new status, host key or inventory), for record_probe to store one by one.

    Most cycles change nothing but the readings: their hosts are written in one bulk
    update and their GPUs' last_seen in one UPDATE, instead of a save per host and per GPU
    (which cost more than everything else the loop does per host). A change of status goes
    through save() so that receivers of Host's signals (the audit log) see it.
    """
    devices = _devices_by_host([host.pk for host, _, _ in probed])
    steady, changed = [], []
    for host, result, seconds in probed:
        if _is_steady(host, result, devices.get(host.pk, [])):
            apply_probe(host, result, seconds, now)
            steady.append((host, result))
        else:
            changed.append((host, result, seconds))
    update_many([host for host, _ in steady], PROBE_FIELDS)
    seen = [host.pk for host, result in steady if result.gpus]
    Device.objects.filter(host_id__in=seen, status=Device.Status.PRESENT).update(last_seen=now)
    return changed


def _devices_by_host(host_ids: list[int]) -> dict[int, list[Device]]:
    devices = {}
    for device in Device.objects.filter(host_id__in=host_ids).order_by():
        devices.setdefault(device.host_id, []).append(device)
    return devices


def _is_steady(host: Host, result: ProbeResult, devices: list[Device]) -> bool:
    if result.new_host_key or result.status != host.status:
        return False
    return result.gpus is None or _same_devices(result, devices)


def _same_devices(result: ProbeResult, devices: list[Device]) -> bool:
    """Whether sync_devices would change nothing but last_seen (slices are compared only
    when nvidia-smi -L was read)."""
    told = result.slices is not None
    present = {
        d.uuid: d
        for d in devices
        if d.status == Device.Status.PRESENT and (told or d.parent_id is None)
    }
    seen = [*result.gpus, *(result.slices or [])]
    if len(seen) != len(present) or {sample.uuid for sample in seen} != present.keys():
        return False
    for sample in seen:
        device = present[sample.uuid]
        parent = present[sample.parent_uuid].pk if sample.parent_uuid else None
        memory = sample.memory_total_mib or device.memory_total_mib
        known = {name: getattr(device, name) for name in _FIELDS} | {"parent": device.parent_id}
        if (_facts(sample, parent), memory) != (known, device.memory_total_mib):
            return False
    return True


# What a probe says a device is, beside its parent and memory.
_FIELDS = ("index", "name", "mig_enabled", "mig_profile", "mig_index")


def _facts(sample, parent) -> dict:
    """The device's fields as a probe's sample gives them (``parent``: a Device or its pk)."""
    return {
        "index": sample.index,
        "name": sample.name,
        "mig_enabled": bool(sample.mig_enabled),
        "parent": parent,
        "mig_profile": sample.mig_profile,
        "mig_index": sample.mig_index,
    }


def hardware_facts(result: ProbeResult, known: dict, now) -> dict:
    """What the host is made of, as of this probe. Driver and CUDA versions are kept from
    before when nvidia-smi could not be asked this time (failed or hung: it says nothing)."""
    cpu = result.cpu
    versions = {"driver_version": result.driver_version, "cuda_version": result.cuda_version}
    if result.gpus is None:
        versions = {key: known.get(key) for key in versions}
    return {
        "cpu_model": cpu.get("model"),
        "cpu_cores": cpu.get("cores"),
        "memory_total_mib": cpu.get("memory_total_mib"),
        "disks": [disk.as_dict() for disk in result.disks],
        **versions,
        "seen_at": now.isoformat(),
    }


def record_host_key(host: Host, key: HostKey) -> None:
    """Record the key seen at first contact, unless another worker recorded one first."""
    recorded = Host.objects.filter(pk=host.pk, host_key="").update(
        host_key_type=key.key_type, host_key=key.key_base64, host_key_fingerprint=key.fingerprint
    )
    if recorded:
        host.host_key_type, host.host_key = key.key_type, key.key_base64
        host.host_key_fingerprint = key.fingerprint


def sync_devices(host: Host, result: ProbeResult, now) -> None:
    """Create new GPUs and MIG slices, refresh seen ones, mark vanished ones lost (never
    delete them). A GPU whose MIG layout changed is a changed inventory like any other: its
    slices that are gone are lost, new ones are created. When nvidia-smi -L could not be
    read (``slices`` is None), the slices of GPUs still there are left as they were."""
    known = {d.uuid: d for d in host.devices.all()}
    seen: dict[str, Device] = {}
    for gpu in result.gpus:
        seen[gpu.uuid] = _sync_device(host, known.pop(gpu.uuid, None), gpu, None, now)
    for piece in result.slices or []:
        parent = seen[piece.parent_uuid]
        seen[piece.uuid] = _sync_device(host, known.pop(piece.uuid, None), piece, parent, now)
    kept = {d.pk for d in seen.values()} if result.slices is None else set()
    present = [d for d in known.values() if d.status == Device.Status.PRESENT]
    vanished = [d.pk for d in present if d.parent_id not in kept]
    Device.objects.filter(pk__in=vanished).update(status=Device.Status.LOST)


def _sync_device(host: Host, device: Device | None, sample, parent: Device | None, now) -> Device:
    facts = _facts(sample, parent)
    if device is None:
        return Device.objects.create(
            host=host,
            uuid=sample.uuid,
            memory_total_mib=sample.memory_total_mib,
            first_seen=now,
            last_seen=now,
            **facts,
        )
    for name, value in facts.items():
        setattr(device, name, value)
    device.memory_total_mib = sample.memory_total_mib or device.memory_total_mib
    device.status, device.last_seen = Device.Status.PRESENT, now
    device.save(update_fields=[*facts, "memory_total_mib", "status", "last_seen"])
    return device
