"""Which UNIX account a user's work runs as on a host, and which accounts nobody may get.

One rule, asked by every place that starts something as a user (tasks, queue runs, gpurun,
self-sign-up): an account runs jobs only if it is an ordinary account. Refused are root,
accounts below ``RUN_AS_MIN_UID`` (system accounts: postgres, www-data...), the monitoring
account of any host (the service key logs in there; usually root) and the service's own
account (it can read the service's SSH key and secret key), unless an admin recorded a
RunAsAllowance. Names are checked here; the UID can only be known on the host, so the task's
start refuses there (``jobs.remote.spawn``) with the floor this module hands out.
"""

import getpass
from dataclasses import dataclass

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db.models import Q

from monitoring import localaccounts
from monitoring.models import Host

from . import changes
from .models import HostAccount, Profile, RunAsAllowance
from .permissions import managed_hosts
from .services import profile_for


@dataclass(frozen=True)
class RunAs:
    """The account to run as, and the lowest UID the host must find it has."""

    name: str
    min_uid: int


def service_account() -> str:
    """The UNIX account the service itself runs as (it owns HIVE_DATA_DIR)."""
    return getpass.getuser()


def refusal(name: str) -> str:
    """Why ``name`` may not run jobs by the rules alone ("" if nothing refuses it by name)."""
    if name == "root":
        return "root is never used to run jobs"
    if name == service_account():
        return f"{name} is the service's own account (it holds the key to every host)"
    if Host.objects.filter(username=name).exists():
        return f"{name} is the monitoring account of a host"
    return ""


def uid_refusal(name: str, uid: int) -> str:
    """Why the account ``name`` with UID ``uid`` may not run jobs ("" if the UID allows it)."""
    if uid < settings.RUN_AS_MIN_UID:
        return f"{name} has UID {uid}, a system account (below {settings.RUN_AS_MIN_UID})"
    return ""


def directory_refusal(name: str, uid: int | None) -> str:
    """Why a directory's or sign-in provider's UNIX name may not become a user's account on
    every host ("" if nothing refuses it): the rules above, and the UID when it says one.
    No allowance lifts it here: an admin who means it maps the account by hand."""
    return refusal(name) or (uid_refusal(name, uid) if uid is not None else "")


def account_taken(host: Host, name: str) -> bool:
    """Someone here already runs as ``name`` on ``host`` (per host, or as their usual name)."""
    if HostAccount.objects.filter(host=host, unix_username=name).exists():
        return True
    overridden = HostAccount.objects.filter(host=host).values("profile")
    return Profile.objects.filter(unix_username=name).exclude(pk__in=overridden).exists()


def allowed(name: str, host: Host) -> bool:
    """An admin explicitly allowed ``name`` on ``host`` (or on every host)."""
    scope = Q(host__isnull=True) | Q(host=host)
    return RunAsAllowance.objects.filter(scope, unix_username=name).exists()


def spawn_min_uid(name: str, host: Host) -> int:
    """The lowest UID the host must find ``name`` has when a task starts (0: allowed)."""
    return 0 if allowed(name, host) else settings.RUN_AS_MIN_UID


def check_run_as(user, host: Host) -> RunAs:
    """The account ``user``'s work runs as on ``host``; ValidationError if none or refused.
    Every start asks this: the answer is kept until the access facts change
    (accesscontrol.changes), per user and host (and per what else decides it here)."""
    key = ("run as", user.pk, host.pk, settings.RUN_AS_MIN_UID, service_account())
    current, found = changes.recall(key)
    if found is changes.MISSING:
        found = changes.keep(current, key, _run_as_or_why_not(user, host))
    if isinstance(found, RunAs):
        return found
    raise ValidationError(found)


def account_for(user, host: Host) -> RunAs:
    """The account ``user``'s tasks run as on ``host``, with the lowest UID the host must find
    it has; ValidationError saying why none can: none mapped, one refused by name
    (``check_run_as``), or, on the service's own machine, one that does not exist there (the
    UID floor of an SSH host is checked there, at the task's start)."""
    account = check_run_as(user, host)
    if host.is_local and (why := localaccounts.problem(host.name, account.name)):
        raise ValidationError(why)
    return account


def _run_as_or_why_not(user, host: Host) -> RunAs | str:
    name = profile_for(user).unix_username_for(host)
    if not name:
        return (
            f"{user} has no UNIX account name for {host}: an admin sets it on the user's "
            "profile (Admin › Profiles)."
        )
    if allowed(name, host):
        return RunAs(name, 0)
    why = refusal(name)
    if why:
        return (
            f"{user} is mapped to the UNIX account {name} on {host}, which is refused: {why}. "
            "An admin may allow it explicitly (Admin › Run-as allowances)."
        )
    return RunAs(name, settings.RUN_AS_MIN_UID)


HIDDEN_COMMAND = "command hidden"


class ProcessVisibility:
    """Whose GPU process command lines a viewer sees: their own (the process runs as their
    UNIX account on that host) and, for superusers and admins of the host, everyone's.
    Command lines carry secrets (``--api-key=sk-...``); user, PID and memory do not."""

    def __init__(self, viewer):
        signed_in = viewer.is_authenticated
        self.profile = profile_for(viewer) if signed_in else None
        self.managed = set(managed_hosts(viewer).values_list("pk", flat=True)) if signed_in else ()

    def shown(self, host: Host, process: dict) -> dict:
        """``process`` as this viewer may see it."""
        if host.pk in self.managed:
            return process
        own = self.profile and self.profile.unix_username_for(host)
        if own and process.get("user") == own:
            return process
        return {**process, "command": HIDDEN_COMMAND}
