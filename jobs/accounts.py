"""Which UNIX account a user's tasks run as on a host.

``run_as`` is the one place that decides it: the start rule, spawning and the init command
ask here, so a further check on the account (e.g. whether it may be used) belongs here too.
"""

from django.core.exceptions import ValidationError

from accesscontrol.services import profile_for
from monitoring import localaccounts
from monitoring.models import Host


def run_as(user, host: Host) -> str:
    """The account ``user``'s tasks run as on ``host``; ValidationError saying why none can."""
    name = profile_for(user).unix_username_for(host)
    if not name:
        raise ValidationError(
            f"{user} has no UNIX account name for {host.name}: an admin sets it on the "
            "user's profile (Admin › Profiles)."
        )
    if host.is_local and (why := localaccounts.problem(host.name, name)):
        raise ValidationError(why)
    return name
