"""GPU processes inside containers: which container each runs in, and whose it is.

nvidia-smi names host PIDs, and ps names their host owner: for a process in a Docker or
rootful Podman container that is root (or whatever uid the image chose, a stranger's on
this host), for a rootless container's non-root process a subordinate uid without a name.
The probe (monitoring/scripts/containers.sh) prints each GPU process's /proc/PID/cgroup, the
engine's inspection of the containers seen there, and the passwd lines of the users whose
own systemd manager holds a container; these pure functions read them.

Whose a containerised process is, in order:

1. a rootless container's (under ``user@UID.service``): that UID's, the user who ran the
   engine (the kernel's placement, not a claim); labels are not read;
2. else the owner label the lab chose (``CONTAINER_OWNER_LABEL``, ``gpuhive.owner``), when
   it names a UNIX account other than root: a rootful container's processes run as root or
   as whatever uid the image chose, so the label is the only statement of whose it is;
3. else the process's own account, when it is a person's (uid at least ``RUN_AS_MIN_UID``,
   not ``nobody``): ``docker run --user $(id -u)``;
4. else nobody we can name: ``user`` is None, shown as "container NAME (owner unknown)",
   never "root".
"""

import json
import re
from dataclasses import dataclass

from django.core.exceptions import ValidationError

from .models import username_validator

UNKNOWN_OWNER = "unknown owner"
NOBODY_UID = 65534
# Short ids, as `docker ps` shows them.
SHORT_ID = 12
# Owner labels naming these are refused: a system's account is nobody's.
REFUSED_OWNERS = frozenset({"root"})

# One path component holding a container: "docker-ID.scope" (systemd driver), "ID" under
# "/docker/" or "/kubepods/..." (cgroupfs driver), "libpod-ID.scope" or "libpod-ID"
# (Podman), "cri-containerd-ID.scope", "crio-ID.scope", or containerd 1.4's
# "kubepods-...slice:cri-containerd:ID". "libpod-conmon-ID.scope" is Podman's monitor
# process, not the container, and matches nothing.
_CONTAINER = re.compile(
    r"(?:^|:)(?:(?P<prefix>docker|libpod|cri-containerd|crio)[-:])?"
    r"(?P<id>[0-9a-f]{64})(?:\.scope)?$"
)
_RUNTIMES = {
    "docker": "docker",
    "libpod": "podman",
    "cri-containerd": "containerd",
    "crio": "cri-o",
}
_USER_MANAGER = re.compile(r"^user@(?P<uid>\d+)\.service$")


@dataclass(frozen=True)
class Container:
    runtime: str  # docker, podman, containerd, cri-o, kubernetes; "" when the path does not say
    id: str  # the full 64 hex digits
    rootless_uid: int | None = None  # whose systemd user manager holds it

    @property
    def short_id(self) -> str:
        return self.id[:SHORT_ID]


@dataclass(frozen=True)
class Inspected:
    """What `docker inspect` or `podman inspect` says of one container."""

    name: str
    labels: dict


def parse_cgroup(text: str) -> Container | None:
    """The container of a process from its /proc/PID/cgroup (v2 ``0::PATH``, v1
    ``N:CONTROLLERS:PATH`` lines), or None for a process outside any container.

    The v2 line is preferred where a host has both (hybrid); else the first v1 line that
    names a container (some controllers, e.g. ``name=systemd``, may sit at the root).
    """
    found = []
    for line in text.splitlines():
        hierarchy, sep, rest = line.partition(":")
        controllers, sep2, path = rest.partition(":")
        if not (sep and sep2 and hierarchy.isdigit()):
            continue
        container = _from_path(path)
        if container is not None:
            found.append((hierarchy != "0" or controllers != "", container))
    return min(found, key=lambda pair: pair[0])[1] if found else None


def _from_path(path: str) -> Container | None:
    parts = path.split("/")
    for index in range(len(parts) - 1, -1, -1):  # the innermost container (docker in docker)
        match = _CONTAINER.search(parts[index])
        if match:
            above = parts[:index]
            return Container(_runtime(match["prefix"], above), match["id"], _rootless(above))
    return None


def _runtime(prefix: str | None, above: list[str]) -> str:
    if prefix:
        return _RUNTIMES[prefix]
    if above and above[-1] == "docker":
        return "docker"
    return "kubernetes" if any(part.startswith("kubepods") for part in above) else ""


def _rootless(above: list[str]) -> int | None:
    for part in above:
        match = _USER_MANAGER.match(part)
        if match:
            return int(match["uid"])
    return None


def parse_cgroups(text: str) -> tuple[Container | None, dict[int, Container | None]]:
    """The probe's "@@cgroups" section: the line "probe" and the probing shell's own cgroup
    file, then "pid N" lines, each followed by that process's. Returns (the probe's own
    container, pid -> container)."""
    files: dict[int | str, list[str]] = {}
    lines: list[str] | None = None
    for line in text.splitlines():
        if line == "probe":
            lines = files.setdefault(line, [])
        elif line.startswith("pid ") and line[4:].isdigit():
            lines = files.setdefault(int(line[4:]), [])
        elif lines is not None:
            lines.append(line)
    own = parse_cgroup("\n".join(files.pop("probe", [])))
    return own, {int(pid): parse_cgroup("\n".join(lines)) for pid, lines in files.items()}


def parse_inspect(text: str) -> dict[str, Inspected]:
    """The "@@containers" section: "TOOL ID NAME LABELS-JSON" lines (the probe's --format).

    A line that does not read so (a tool's warning on standard output) is left out: it
    costs a label, never the probe. Docker writes names with a leading "/", Podman without.
    """
    found = {}
    for line in text.splitlines():
        fields = line.split(" ", 3)
        if len(fields) != 4 or not re.fullmatch(r"[0-9a-f]{64}", fields[1]):
            continue
        try:
            labels = json.loads(fields[3])
        except ValueError:
            continue
        if labels is not None and not isinstance(labels, dict):
            continue
        found[fields[1]] = Inspected(fields[2].lstrip("/"), labels or {})
    return found


def parse_passwd(text: str) -> dict[int, str]:
    """uid -> name from `getent passwd` lines (``name:x:uid:gid:gecos:home:shell``)."""
    names = {}
    for line in text.splitlines():
        fields = line.split(":")
        if len(fields) >= 3 and fields[2].isdigit() and fields[0]:
            names[int(fields[2])] = fields[0]
    return names


def label_owner(labels: dict, key: str) -> str | None:
    """The UNIX account the owner label names; None when absent, not a UNIX name, or root."""
    value = labels.get(key)
    if not isinstance(value, str) or len(value) > 32 or value in REFUSED_OWNERS:
        return None
    try:
        username_validator(value)
    except ValidationError:
        return None
    return value


def is_personal(uid: int, user: str, first_personal_uid: int) -> bool:
    """Whether a host account is a person's: not root, a system account or nobody, and
    known by name (ps prints a uid without a passwd entry as its number)."""
    return uid >= first_personal_uid and uid != NOBODY_UID and not user.isdigit()


@dataclass(frozen=True)
class Facts:
    """What one probe learnt about the containers on GPUs, and the rules' settings."""

    cgroups: dict[int, Container | None]
    # The container the probe itself runs in: a host that is a container (the service's own
    # in Docker, a container-based login node) has its processes there, not "in a container".
    probe_container: Container | None
    inspected: dict[str, Inspected]
    passwd: dict[int, str]
    label_key: str
    first_personal_uid: int


def attribute(
    pid: int | None, ps_uid: int | None, ps_user: str | None, facts: Facts
) -> tuple[str | None, dict | None]:
    """(owner, container dict) of one GPU process: see the module's docstring for the rule.

    Outside a container the owner is ps's, as before; the container dict is None.
    """
    container = facts.cgroups.get(pid) if pid is not None else None
    if container is None or container.id == getattr(facts.probe_container, "id", None):
        return ps_user, None
    inspected = facts.inspected.get(container.id)
    shown = {
        "id": container.short_id,
        "name": inspected.name if inspected else "",
        "runtime": container.runtime,
    }
    return _owner(container, inspected, ps_uid, ps_user, facts), shown


def _owner(
    container: Container,
    inspected: Inspected | None,
    ps_uid: int | None,
    ps_user: str | None,
    facts: Facts,
) -> str | None:
    if container.rootless_uid is not None:
        named = facts.passwd.get(container.rootless_uid)
        if named is None and ps_uid == container.rootless_uid:
            named = ps_user  # the container's root is the user: ps knows the name
        return named if named and not named.isdigit() else None
    labelled = label_owner(inspected.labels, facts.label_key) if inspected else None
    if labelled:
        return labelled
    if ps_user and ps_uid is not None and is_personal(ps_uid, ps_user, facts.first_personal_uid):
        return ps_user
    return None


def describe_owner(user: str | None, container_id: str = "", container_name: str = "") -> str:
    """How pages, mail and the admin say whose a process is: "alice", "alice (container
    train-3)", "container train-3 (owner unknown)", or "unknown owner"."""
    if not (container_id or container_name):
        return user or UNKNOWN_OWNER
    container = f"container {container_name or container_id}"
    return f"{user} ({container})" if user else f"{container} (owner unknown)"


def owner_text(process: dict) -> str:
    """describe_owner for one process of a probe snapshot."""
    container = process.get("container") or {}
    return describe_owner(process.get("user"), container.get("id", ""), container.get("name", ""))
