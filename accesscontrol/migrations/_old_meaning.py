"""What rows written before migration 0004 meant, written down explicitly (run by 0004 only,
so only on databases of a version from before it; used with historical models).

Before 0004 an empty UNIX name on a profile (or no profile) meant "the account named like the
web user"; since then it means "no account". And jobs could run as the service's own account
(on ``localhost`` they could run as nothing else); since then it is refused unless an admin
records a run-as allowance. So:

- an empty name becomes the web user name the old version used, unless that name is root, a
  system account of this machine (UID below RUN_AS_MIN_UID, or nobody's 65534 and above) or a
  host's monitoring account: those are left empty and listed for the admin. A name this
  machine does not know is carried: users' accounts live on the GPU hosts, not necessarily
  here, and a task's start still refuses a system account there (its UID floor);
- where the old version ran jobs as the service's own account (tasks that ran as it, users
  mapped to it), that account is allowed there, and the admin is told; never root.

Whatever is left for the admin, and every change, is written to the audit log; migration
0006 turns the former into UpgradeNotes (its table does not exist yet here).
"""

import getpass
import pwd
import re

from django.conf import settings

UNIX_NAME = re.compile(r"^[a-z_][a-z0-9_.\-]*\$?\Z")
NOBODY_UID = 65534
LEFT_FOR_ADMIN = "upgrade.left_for_admin"
PROFILES = "Admin › Profiles"


def carry_old_meaning(apps, schema_editor):
    models = Models(apps)
    monitoring_accounts = set(models.Host.objects.values_list("username", flat=True))
    anonymous = getattr(settings, "ANONYMOUS_USER_NAME", "AnonymousUser")
    for user in models.User.objects.exclude(username=anonymous).order_by("pk"):
        carry_unix_name(models, user, monitoring_accounts)
    carry_service_account(models, getpass.getuser())


class Models:
    """The historical models this needs, looked up once."""

    def __init__(self, apps):
        self.User = apps.get_model(settings.AUTH_USER_MODEL)
        self.Profile = apps.get_model("accesscontrol", "Profile")
        self.HostAccount = apps.get_model("accesscontrol", "HostAccount")
        self.RunAsAllowance = apps.get_model("accesscontrol", "RunAsAllowance")
        self.Host = apps.get_model("monitoring", "Host")
        self.Task = apps.get_model("jobs", "Task")
        self.AuditEvent = apps.get_model("audit", "AuditEvent")

    def audit(self, action: str, target, **detail) -> None:
        self.AuditEvent.objects.create(
            actor_name="system", action=action, target=str(target)[:255], detail=detail
        )

    def leave(self, kind: str, user, text: str) -> None:
        user_id = getattr(user, "pk", None)
        self.audit(LEFT_FOR_ADMIN, user or "", kind=kind, user_id=user_id, text=text)


def carry_unix_name(models: Models, user, monitoring_accounts: set[str]) -> None:
    profile = models.Profile.objects.filter(user=user).first()
    if profile is not None and profile.unix_username:
        return
    old = user.username if UNIX_NAME.match(user.username) else ""
    if not old:
        return  # not a UNIX name: the old version could not start his jobs either
    profile = profile or models.Profile(user=user)
    why = refused_by_name(old, monitoring_accounts)
    if why:
        profile.save()
        models.leave("unix name", user, left_text(user.username, old, why))
        return
    profile.unix_username = old
    profile.save()
    models.audit("upgrade.unix_name_carried", user, unix_user=old)


def refused_by_name(name: str, monitoring_accounts: set[str]) -> str:
    """Why ``name`` is not carried on the upgrade's own authority ("" when it is)."""
    if name == "root":
        return "the superuser's account"
    if name in monitoring_accounts:
        return "the monitoring account of a host"
    try:
        uid = pwd.getpwnam(name).pw_uid
    except KeyError:
        return ""
    if uid < settings.RUN_AS_MIN_UID or uid >= NOBODY_UID:
        return f"a system account of this machine (UID {uid})"
    return ""


def left_text(username: str, old: str, why: str) -> str:
    return (
        f"User {username} has an empty UNIX name, which before this version meant the account "
        f"'{old}', {why}; the upgrade left it empty, which now means no account (their jobs "
        "cannot start, their processes on their bookings count as intrusions). Set their UNIX "
        f"name ({PROFILES}), or delete this note to keep them without one."
    )


def carry_service_account(models: Models, service: str) -> None:
    """Allow the service's own account where the old version ran jobs as it."""
    everywhere = models.Profile.objects.filter(unix_username=service).exists()
    ran = models.Task.objects.filter(unix_username=service).values_list("host", flat=True)
    mapped = models.HostAccount.objects.filter(unix_username=service).values_list("host", flat=True)
    host_ids = sorted(set(ran) | set(mapped))
    if not everywhere and not host_ids:
        return
    where = "every host" if everywhere else ", ".join(
        models.Host.objects.filter(pk__in=host_ids).order_by("name").values_list("name", flat=True)
    )
    if service == "root":
        models.leave("run as", None, root_text(where))
        return
    for host_id in [None] if everywhere else host_ids:
        models.RunAsAllowance.objects.get_or_create(
            unix_username=service,
            host_id=host_id,
            defaults={"reason": "upgrade: the version before ran jobs as this account"},
        )
    models.audit("upgrade.run_as_allowed", service, unix_user=service, where=where)
    models.leave("run as", None, allowed_text(service, where))


def allowed_text(service: str, where: str) -> str:
    return (
        f"Jobs ran as '{service}', the service's own account, on {where} before this version, "
        "which refuses that account unless an admin allows it (it can read the service's SSH "
        f"and secret keys). The upgrade allowed it on {where} so those jobs keep running: "
        "delete the allowance (Admin › Run-as allowances) if they should not, and this note "
        "once decided."
    )


def root_text(where: str) -> str:
    return (
        f"Jobs ran as root, the service's own account, on {where} before this version, which "
        "never runs jobs as root unless an admin allows it (Admin › Run-as allowances); the "
        "upgrade did not. Map those users to their own accounts, and delete this note."
    )
