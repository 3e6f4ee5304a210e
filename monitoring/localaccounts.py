"""Running as a user's UNIX account on the machine the service runs on (``localhost``).

Over SSH the service logs in as an account; locally there is no login, so commands go
through ``setpriv``: a service running as root switches to the account, and in every case
the environment is reset as an SSH login would give it, in the account's home. A service
running as anyone else can run commands only as itself.
"""

import os
import pwd

from . import hostscripts

# An SSH login starts in the account's home; a local command as that account does too.
_IN_HOME = hostscripts.load("monitoring", "in-home.sh")


def service_account() -> str:
    """The account this process runs as (by its uid: $USER may be a sudoer's)."""
    return pwd.getpwuid(os.geteuid()).pw_name


def service_is_root() -> bool:
    return os.geteuid() == 0


def account_exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def problem(host_name: str, name: str) -> str:
    """Why commands cannot run locally as ``name`` ("" when they can)."""
    if name == service_account():
        return ""
    if not service_is_root():
        return (
            f"{host_name} runs tasks only as {service_account()}, not as {name}: the service "
            "does not run as root; reach this machine over SSH instead (see `manage.py init`)."
        )
    if not account_exists(name):
        return f"{host_name} has no UNIX account {name!r}."
    return ""


def as_account(name: str, argv: list[str]) -> list[str]:
    """``argv`` run locally as ``name``, as an SSH login would run it: the environment reset
    to the account's own (HOME, USER, LOGNAME, SHELL, a plain PATH; nothing of the service's
    leaks in) and its home as the working directory. Another account than the service's
    needs root. Every value stays one argv item: nothing is parsed by a shell."""
    switch = ["setpriv", "--reset-env"]
    if name != service_account():
        entry = pwd.getpwnam(name)
        switch += [f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}", "--init-groups"]
    return [*switch, "--", "sh", "-c", _IN_HOME, "sh", *argv]
