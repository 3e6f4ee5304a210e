"""Who a process belongs to: UNIX names as ps prints them, and the service users behind them."""

from accesscontrol.models import HostAccount, Profile
from accesscontrol.services import profile_for
from monitoring.models import Host

SYSTEM_ACCOUNTS = frozenset({"root"})


def resolved_unix_name(ps_user: str | None) -> str | None:
    """The owner's UNIX name, or None when ps could not tell.

    ps prints the numeric uid for a uid without a passwd entry (e.g. a container's user);
    UNIX names never start with a digit, so a number means "unknown", not a name.
    """
    if not ps_user or ps_user.isdigit():
        return None
    return ps_user


class UnixNames:
    """Each service user's UNIX name on one host, looked up once per detection pass."""

    def __init__(self, host: Host):
        self.host = host
        self._names: dict[int, str] = {}

    def of(self, user) -> str:
        if user.pk not in self._names:
            self._names[user.pk] = profile_for(user).unix_username_for(self.host)
        return self._names[user.pk]


def service_user(host: Host, unix_name: str):
    """The one service user whose account on ``host`` is ``unix_name``; None if none or several.

    Mirrors Profile.unix_username_for: a per-host account first, then the usual UNIX name
    (never the web user name). Two candidates means we cannot tell who it is, so nobody is
    named (and nobody is mailed by mistake). root's processes are the system's (drivers,
    daemons, the service itself): never any one user's, even one whose tasks were set to run
    as root.
    """
    if unix_name in SYSTEM_ACCOUNTS:
        return None
    account = HostAccount.objects.filter(host=host, unix_username=unix_name)
    users = [a.profile.user for a in account.select_related("profile__user")[:2]]
    if not users:
        overridden = HostAccount.objects.filter(host=host).values("profile")
        profiles = Profile.objects.filter(unix_username=unix_name).exclude(pk__in=overridden)
        users = [p.user for p in profiles.select_related("user")[:2]]
    return users[0] if len(users) == 1 else None
