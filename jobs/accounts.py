"""Which UNIX account a user's tasks run as on a host, and how a local task becomes it.

One function (``run_as``) answers for everyone: the start rule, spawning, the profile page.
Over SSH the service logs in as that account. On the machine the service runs on
(``localhost``, no SSH) a service running as root switches to the account with ``setpriv``,
with the environment reset as an SSH login would give it; a service running as anyone else
can run tasks only as itself (``init`` says how to reach localhost over SSH instead).
"""

import getpass
import os
import pwd

from django.core.exceptions import ValidationError

from accesscontrol.services import profile_for
from monitoring.models import Host

# An SSH login starts in the account's home with a fresh environment; a local task does too.
_LOGIN_SHELL = 'cd "$HOME" 2>/dev/null || cd /; exec "$@"'


def service_account() -> str:
    return getpass.getuser()


def service_is_root() -> bool:
    return os.geteuid() == 0


def account_exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def run_as(user, host: Host) -> str:
    """The account ``user``'s tasks run as on ``host``; ValidationError saying why none can.

    This is the one place that decides it (the start rule, spawning and the profile page ask
    here), so a check of another kind (e.g. whether the account may be used) belongs here.
    """
    name = profile_for(user).unix_username_for(host)
    if not name:
        raise ValidationError(
            f"{user} has no UNIX account name for {host.name}: an admin sets it on the "
            "user's profile (Admin › Profiles)."
        )
    if host.is_local:
        check_local_account(host, name)
    return name


def check_local_account(host: Host, name: str) -> None:
    if name == service_account():
        return
    if not service_is_root():
        raise ValidationError(
            f"{host.name} runs tasks only as {service_account()}, not as {name}: the service "
            "does not run as root; reach this machine over SSH instead (see `manage.py init`)."
        )
    if not account_exists(name):
        raise ValidationError(f"{host.name} has no UNIX account {name!r}.")


def local_argv(username: str, argv: list[str]) -> list[str]:
    """``argv`` run locally as ``username``: as is for the service's own account, else through
    setpriv (root only), with the login's environment and home. Values stay argv items."""
    if username == service_account():
        return argv
    return [
        "setpriv",
        f"--reuid={username}",
        f"--regid={pwd.getpwnam(username).pw_gid}",
        "--init-groups",
        "--reset-env",
        "--",
        "sh",
        "-c",
        _LOGIN_SHELL,
        "sh",
        *argv,
    ]
