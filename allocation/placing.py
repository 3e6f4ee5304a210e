"""Where a user's work could start now, as the server decides it (the CLI only asks).

Both answers come from the start rule (rule.Cluster) and the packing rules the queue uses
(placement), so `hive submit --gpus N`, `hive status --free`, the queue and a job's start
cannot disagree about a GPU.
"""

from dataclasses import dataclass, field
from datetime import datetime

from django.contrib.auth.models import User
from django.utils import timezone

from monitoring.models import Device

from .placement import Pool, Request, Slot, place_request
from .rule import Cluster, Reason


@dataclass
class Placement:
    """The GPUs chosen (empty when none fit), or every reason the request does not fit now."""

    devices: list[Device] = field(default_factory=list)
    reasons: list[Reason] = field(default_factory=list)
    detail: str = ""

    @property
    def placed(self) -> bool:
        return bool(self.devices)


def usability(user: User, now: datetime | None = None) -> list[tuple[Device, list[Reason]]]:
    """Every present GPU of every enabled host, with why ``user`` may not start on it now."""
    cluster = Cluster(now or timezone.now())
    return [(gpu.device, cluster.reasons(user, pk)) for pk, gpu in cluster.gpus.items()]


def place(user: User, request: Request, now: datetime | None = None) -> Placement:
    """GPUs for ``request`` that ``user`` may start on now: best fit, as the queue places."""
    cluster = Cluster(now or timezone.now())
    open_slots = {
        pk: Slot.of(gpu.device) for pk, gpu in cluster.gpus.items() if not cluster.reasons(user, pk)
    }
    chosen = place_request(request, Pool(open_slots, cluster.free_per_host()))
    if chosen:
        by_pk = {pk: gpu.device for pk, gpu in cluster.gpus.items()}
        return Placement(devices=[by_pk[s.device_id] for s in chosen])
    return _refusal(cluster, user, request)


def _refusal(cluster: Cluster, user: User, request: Request) -> Placement:
    if request.kind == "devices":
        ids = list(request.device_ids)
    else:
        ids = [pk for pk, gpu in cluster.gpus.items() if request.matches(Slot.of(gpu.device))]
    reasons = [r for pk in ids for r in cluster.reasons(user, pk)]
    usable = len(ids) - len({r.device_id for r in reasons})
    return Placement(reasons=reasons, detail=_sentence(cluster, request, len(ids), usable))


def _sentence(cluster: Cluster, request: Request, matching: int, usable: int) -> str:
    if request.kind == "devices":
        return "Not all of these GPUs can be used now."
    plural, verb = ("s", "are") if request.count != 1 else ("", "is")
    where = "on one host" if request.kind == "one_host" else "across the hosts"
    if request.host_id is not None:
        hosts = {g.host.pk: g.host.name for g in cluster.gpus.values()}
        where = f"on {hosts.get(request.host_id, 'that host')}"
    if matching < request.count:
        return f"There are not {request.count} GPU{plural} {where} that fit the request."
    return (
        f"{request.count} GPU{plural} {verb} not usable now {where} ({usable} of the "
        f"{matching} that fit are)."
    )
