"""Who may see and act on reservations in the admin (rules for accesscontrol.restrict).

Everyone signed in sees the calendar through the pages and API; in the admin, a host admin
sees and decides on the bookings of the hosts they manage, and owners see their own.
"""

from django.db.models import Q

from accesscontrol.permissions import managed_hosts, rule

from .models import Reservation


def _on_managed_hosts(user) -> Q:
    return Q(slots__device__host__in=managed_hosts(user).values("pk"))


@rule(Reservation, "view")
def own_or_on_managed_hosts(user) -> Q:
    return Q(owner=user) | _on_managed_hosts(user)


@rule(Reservation, "change")
def on_managed_hosts(user) -> Q:
    return _on_managed_hosts(user)
