"""The lab as the API shows it: GPUs with their use, users and bookings; GPU names to ids."""

import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from .api import Api, HiveError
from .when import now

HORIZON = timedelta(days=1)  # how far ahead `status` looks for the next booking


@dataclass
class Gpu:
    id: int
    host: str
    index: int
    model: str
    present: bool
    host_status: str
    memory_total_mib: int | None
    latest: dict | None
    processes: list[dict] = field(default_factory=list)
    reservation: dict | None = None
    next_reservation: dict | None = None
    # The server's start rule for the signed-in user: whether they may start on it now,
    # and if not, why ({"code", "device", "detail"}; see GET /api/placement/).
    usable: bool = False
    reasons: list[dict] = field(default_factory=list)
    # A MIG slice of GPU ``index``: its number there and its profile (a GPU: None, "").
    mig_index: int | None = None
    mig_profile: str = ""

    @classmethod
    def chosen(cls, row: dict) -> "Gpu":
        """A GPU the placement endpoint chose (usable by definition)."""
        return cls(
            id=row["id"],
            host=row["host"],
            index=row["index"],
            model=row["model"],
            present=True,
            host_status="up",
            memory_total_mib=row["memory_total_mib"],
            latest=None,
            usable=True,
            mig_index=row.get("mig_index"),
            mig_profile=row.get("mig_profile") or "",
        )

    @property
    def name(self) -> str:
        """node-1:0 for a GPU, node-1:0.2 for MIG slice 2 of GPU 0."""
        return f"{self.host}:{label(vars(self))}"

    @property
    def users(self) -> list[str]:
        return sorted({p.get("user") or "?" for p in self.processes})

    def as_dict(self) -> dict:
        latest = self.latest or {}
        return {
            "id": self.id,
            "name": self.name,
            "host": self.host,
            "index": self.index,
            "model": self.model,
            "mig_profile": self.mig_profile,
            "host_status": self.host_status,
            "present": self.present,
            "utilization_gpu": latest.get("utilization_gpu"),
            "memory_used_mib": latest.get("memory_used_mib"),
            "memory_total_mib": self.memory_total_mib,
            "temperature_c": latest.get("temperature_c"),
            "users": self.users,
            "processes": self.processes,
            "reservation": self.reservation,
            "next_reservation": self.next_reservation,
            "free": self.usable,
            "reasons": self.reasons,
        }


def devices(api: Api, host: str = "") -> list[dict]:
    rows = api.get("devices/")
    return [d for d in rows if not host or d["host"] == host]


def gpus(api: Api, host: str = "") -> list[Gpu]:
    """Every GPU (of one host), with its processes, its current and next booking, and
    whether the signed-in user may start on it now (the server decides)."""
    hosts = {h["name"]: h["status"] for h in api.get("hosts/")}
    if host and host not in hosts:
        raise HiveError(f"No host named {host!r}; hosts: {', '.join(sorted(hosts)) or 'none'}.")
    found = [_gpu(d, hosts.get(d["host"], "unknown")) for d in devices(api, host)]
    by_id = {g.id: g for g in found}
    for process in api.get("processes/", host=host):
        if process.get("device") in by_id:
            by_id[process["device"]].processes.append(process)
    _attach_bookings(api, by_id, now())
    for row in api.get("placement/"):
        if row["id"] in by_id:
            by_id[row["id"]].usable, by_id[row["id"]].reasons = row["usable"], row["reasons"]
    return sorted(
        found, key=lambda g: (g.host, g.index, -1 if g.mig_index is None else g.mig_index)
    )


def _gpu(device: dict, host_status: str) -> Gpu:
    return Gpu(
        id=device["id"],
        host=device["host"],
        index=device["index"],
        model=device.get("name") or "",
        present=device.get("status") == "present",
        host_status=host_status,
        memory_total_mib=device.get("memory_total_mib"),
        latest=device.get("latest"),
        mig_index=device.get("mig_index"),
        mig_profile=device.get("mig_profile") or "",
    )


def _attach_bookings(api: Api, by_id: dict[int, Gpu], at: datetime) -> None:
    window = {"start": at.isoformat(), "end": (at + HORIZON).isoformat()}
    bookings = [r for r in api.get("reservations/", **window) if r["status"] != "cancelled"]
    for booking in sorted(bookings, key=lambda r: r["start"]):
        current = datetime.fromisoformat(booking["start"]) <= at
        for device in booking["devices"]:
            gpu = by_id.get(device)
            if gpu is None:
                continue
            if current and gpu.reservation is None:
                gpu.reservation = _booking(booking)
            elif not current and gpu.next_reservation is None:
                gpu.next_reservation = _booking(booking)


def _booking(r: dict) -> dict:
    keys = ("id", "title", "owner", "start", "end", "status")
    return {k: r[k] for k in keys}


def label(device: dict) -> str:
    """A device's name on its host: "0" for GPU 0, "0.2" for MIG slice 2 of GPU 0."""
    if device.get("mig_index") is None:
        return str(device["index"])
    return f"{device['index']}.{device['mig_index']}"


def parse_gpus(specs: tuple[str, ...] | list[str]) -> list[tuple[str, list[str] | None]]:
    """`node-1:0,1` -> [("node-1", ["0", "1"])]; `node-1:0.2` (MIG slice 2 of GPU 0) ->
    [("node-1", ["0.2"])]; `node-2` (all its GPUs) -> [("node-2", None)]."""
    wanted = []
    for spec in (part for text in specs for part in text.replace(";", " ").split()):
        host, _, indexes = spec.partition(":")
        if not host:
            raise HiveError(f"{spec!r}: write GPUs as HOST:INDEX[,INDEX...], e.g. node-1:0,1.")
        names = [i.strip() for i in indexes.split(",") if i.strip()] if indexes else None
        if names and not all(re.fullmatch(r"\d+(\.\d+)?", name) for name in names):
            raise HiveError(
                f"{spec!r}: GPU indexes are numbers, e.g. node-1:0,1 (a MIG slice: node-1:0.2)."
            )
        # "01" names GPU 1, as it did when indexes were read as numbers
        wanted.append(
            (host, names and [".".join(str(int(p)) for p in n.split(".")) for n in names])
        )
    if not wanted:
        raise HiveError("Name the GPUs, e.g. --gpus node-1:0,1.")
    return wanted


def resolve_gpus(api: Api, specs) -> list[dict]:
    """The API's devices named by ``specs``, or an error naming what does not exist."""
    known = [d for d in devices(api) if d.get("status") == "present"]
    chosen = []
    for host, indexes in parse_gpus(specs):
        on_host = {label(d): d for d in known if d["host"] == host}
        if not on_host:
            hosts = ", ".join(sorted({d["host"] for d in known})) or "none"
            raise HiveError(f"No GPUs on a host named {host!r}; hosts: {hosts}.")
        gpus = [name for name, d in on_host.items() if d.get("mig_index") is None]
        for index in indexes if indexes is not None else sorted(gpus, key=int):
            if index not in on_host:
                have = ", ".join(sorted(on_host, key=lambda n: [int(p) for p in n.split(".")]))
                raise HiveError(f"{host} has no GPU {index} (it has {have}).")
            chosen.append(on_host[index])
    return chosen


def device_names(api: Api) -> dict[int, str]:
    return {d["id"]: f"{d['host']}:{label(d)}" for d in devices(api)}
