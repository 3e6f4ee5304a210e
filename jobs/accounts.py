"""Which UNIX account a user's tasks run as on a host.

``run_as`` is the one place that decides it: the start rule, spawning and the init command
ask here, so a further check on the account (e.g. whether it may be used) belongs here too.
"""

from django.core.exceptions import ValidationError

from accesscontrol.accounts import check_run_as
from monitoring import localaccounts
from monitoring.models import Host


def run_as(user, host: Host) -> str:
    """The account ``user``'s tasks run as on ``host``; ValidationError saying why none can
    (none mapped, or refused: root, the monitoring or service account... unless allowed, see
    accesscontrol.accounts.check_run_as; the UID floor is checked on the host at spawn)."""
    name = check_run_as(user, host).name
    if host.is_local and (why := localaccounts.problem(host.name, name)):
        raise ValidationError(why)
    return name
