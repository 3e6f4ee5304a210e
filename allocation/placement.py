"""Placing a job's GPU requests on usable GPUs: best fit, all tasks or none.

Pure functions over plain values, so the packing rules are easy to test and to read:

- a request for N GPUs on one host goes to the host that fits with the fewest free GPUs
  (best fit, as HiveD does), so hosts with many free GPUs stay whole for big jobs;
- "N GPUs on any hosts" fits on one host when it can; otherwise it takes the hosts with the
  most usable GPUs and finishes on the best-fitting one (fewest hosts);
- GPUs that would need an opportunistic job preempted are used only when free ones do not
  suffice, and a request that needs them is placed last among equals;
- a request for a MIG profile ("a 1g.10gb slice anywhere") takes only MIG slices of that
  profile, and a request for GPUs only whole GPUs: not slices, nor a GPU in MIG mode, whose
  compute CUDA reaches only through its slices (named devices take what they name).

The kinds of request and their limits are here too: the queue's tasks, the new-job form and
the placement endpoint ask for GPUs in these words.
"""

from dataclasses import dataclass, field

from django.core.exceptions import ValidationError
from django.db import models

from monitoring.models import Device

MAX_GPUS_PER_TASK = 64


class Kind(models.TextChoices):
    """How a task asks for GPUs."""

    DEVICES = "devices", "These GPUs"
    ONE_HOST = "one_host", "N GPUs on one host"
    ANY_HOSTS = "any_hosts", "N GPUs on any hosts"


def check_named_devices(devices: list) -> None:
    """GPUs named for one task: at least one, all on one host."""
    if not devices:
        raise ValidationError("Name at least one GPU, or ask for a number of GPUs.")
    if len({d.host_id for d in devices}) > 1:
        raise ValidationError(
            "Named GPUs of one task must be on one host (a task runs on one "
            "host); use one task per host."
        )


@dataclass(frozen=True)
class Slot:
    """A GPU a job may be placed on this round."""

    device_id: int
    host_id: int
    index: int
    model: str = ""
    memory_mib: int | None = None
    preempts: int | None = None  # the opportunistic run that holds it now, if any
    mig_profile: str = ""  # a MIG slice's profile ("" for a GPU)
    partitioned: bool = False  # a GPU in MIG mode

    @classmethod
    def of(cls, device: Device, preempts: int | None = None) -> "Slot":
        """The slot of a monitoring Device (its fields are read, nothing is queried)."""
        return cls(
            device.pk,
            device.host_id,
            device.index,
            device.name,
            device.memory_total_mib,
            preempts,
            mig_profile=device.mig_profile,
            partitioned=device.mig_enabled,
        )


@dataclass(frozen=True)
class Request:
    """One task's need: named devices, or ``count`` GPUs on one host / on any hosts."""

    kind: str  # "devices" | "one_host" | "any_hosts"
    count: int = 1
    device_ids: tuple[int, ...] = ()
    host_id: int | None = None
    model: str = ""
    min_memory_mib: int | None = None
    mig_profile: str = ""  # MIG slices of this profile, instead of GPUs

    def matches(self, slot: Slot) -> bool:
        if self.kind == "devices":
            return slot.device_id in self.device_ids
        if slot.partitioned or slot.mig_profile != self.mig_profile:
            return False
        if self.host_id is not None and slot.host_id != self.host_id:
            return False
        if self.model and self.model.lower() not in slot.model.lower():
            return False
        if self.min_memory_mib and (slot.memory_mib or 0) < self.min_memory_mib:
            return False
        return True

    @property
    def size(self) -> int:
        return len(self.device_ids) if self.kind == "devices" else self.count


@dataclass
class Pool:
    """The slots still open this round and how many free GPUs each host has left."""

    slots: dict[int, Slot]
    free_per_host: dict[int, int] = field(default_factory=dict)

    def take(self, chosen: list[Slot]) -> None:
        for slot in chosen:
            del self.slots[slot.device_id]
            if slot.preempts is None:
                self.free_per_host[slot.host_id] = self.free_per_host.get(slot.host_id, 1) - 1

    def copy(self) -> "Pool":
        return Pool(dict(self.slots), dict(self.free_per_host))


def _preferred(slots: list[Slot]) -> list[Slot]:
    """Free GPUs before ones held by opportunistic jobs, then in index order."""
    return sorted(slots, key=lambda s: (s.preempts is not None, s.host_id, s.index))


def _by_host(request: Request, pool: Pool) -> dict[int, list[Slot]]:
    hosts: dict[int, list[Slot]] = {}
    for slot in pool.slots.values():
        if request.matches(slot):
            hosts.setdefault(slot.host_id, []).append(slot)
    return hosts


def _best_fit(hosts: dict[int, list[Slot]], need: int, pool: Pool) -> list[Slot] | None:
    """``need`` slots from the fitting host with the fewest free GPUs left after placing."""
    fitting = [h for h, slots in hosts.items() if len(slots) >= need]
    if not fitting:
        return None

    def cost(host_id: int) -> tuple[int, int, int]:
        chosen = _preferred(hosts[host_id])[:need]
        preempting = sum(s.preempts is not None for s in chosen)
        return (preempting, pool.free_per_host.get(host_id, 0), host_id)

    return _preferred(hosts[min(fitting, key=cost)])[:need]


def _spread(hosts: dict[int, list[Slot]], need: int, pool: Pool) -> list[Slot] | None:
    """Fewest hosts: whole hosts with the most usable GPUs, then the best fit for the rest."""
    chosen: list[Slot] = []
    hosts = dict(hosts)
    while need > 0:
        last = _best_fit(hosts, need, pool)
        if last is not None:
            return chosen + last
        if not hosts:
            return None
        biggest = max(hosts, key=lambda h: (len(hosts[h]), -h))
        taken = _preferred(hosts.pop(biggest))
        chosen, need = chosen + taken, need - len(taken)
    return chosen


def place_request(request: Request, pool: Pool) -> list[Slot] | None:
    if request.size < 1:
        return None
    if request.kind == "devices":
        slots = [pool.slots[d] for d in request.device_ids if d in pool.slots]
        return slots if len(slots) == len(request.device_ids) else None
    hosts = _by_host(request, pool)
    if request.kind == "one_host":
        return _best_fit(hosts, request.count, pool)
    return _spread(hosts, request.count, pool)


def place_job(requests: list[Request], pool: Pool) -> list[list[Slot]] | None:
    """Slots for every request (in the given order), taken from ``pool``; None if any fails.

    Named devices go first, then the biggest requests, so small ones fill the gaps left.
    On failure the pool is left as it was: a job is placed whole or not at all.
    """
    trial = pool.copy()
    order = sorted(
        range(len(requests)), key=lambda i: (requests[i].kind != "devices", -requests[i].size, i)
    )
    placed: dict[int, list[Slot]] = {}
    for i in order:
        chosen = place_request(requests[i], trial)
        if chosen is None:
            return None
        trial.take(chosen)
        placed[i] = chosen
    pool.slots, pool.free_per_host = trial.slots, trial.free_per_host
    return [placed[i] for i in range(len(requests))]
