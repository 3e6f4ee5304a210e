"""Who sees idle notices: the booking's owner and the admins of its hosts."""

from django.db.models import Q

from accesscontrol.permissions import managed_hosts, rule

from .models import IdleNotice


@rule(IdleNotice, "view")
def notices_concerning(user) -> Q:
    hosts = managed_hosts(user).values("pk")
    return Q(reservation__owner=user) | Q(reservation__slots__device__host__in=hosts)
