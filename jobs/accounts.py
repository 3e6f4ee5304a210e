"""Which UNIX account a user's tasks run as on a host.

``run_as`` is the one place that decides it: the start rule, spawning and the init command
ask here, so a further check on the account (e.g. whether it may be used) belongs here too.
"""

from django.core.exceptions import ValidationError

from accesscontrol.accounts import RunAs, check_run_as
from monitoring import localaccounts
from monitoring.models import Host


def account_for(user, host: Host) -> RunAs:
    """The account ``user``'s tasks run as on ``host``, with the lowest UID the host must find
    it has; ValidationError saying why none can (none mapped, or refused: root, the monitoring
    or service account... unless allowed, see accesscontrol.accounts.check_run_as; the UID
    floor is checked on the host at spawn)."""
    account = check_run_as(user, host)
    if host.is_local and (why := localaccounts.problem(host.name, account.name)):
        raise ValidationError(why)
    return account


def run_as(user, host: Host) -> str:
    """The name of ``account_for``'s account."""
    return account_for(user, host).name
