"""Who sees which violations: the reservation's owner, the offender, and the host's admins."""

from django.db.models import Q

from accesscontrol.permissions import managed_hosts, rule

from .models import Violation


@rule(Violation, "view")
def violations_concerning(user) -> Q:
    return (
        Q(reservation_owner=user)
        | Q(offender=user)
        | Q(device__host__in=managed_hosts(user).values("pk"))
    )
