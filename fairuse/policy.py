"""Which idle rule applies to a reservation.

Host policies come first (the host's admin decides for the machine); without one, the
policies of the owner's groups; without those, the site's settings. Where several apply
(a booking across hosts, an owner in several groups), the most lenient wins: the mildest
action, then the longest idle time and grace, so nobody loses GPUs to a rule that does not
clearly apply to them.
"""

from dataclasses import dataclass

from django.conf import settings

from .models import Action, IdlePolicy

SEVERITY = {Action.OFF: 0, Action.WARN: 1, Action.RELEASE: 2}


@dataclass(frozen=True)
class Policy:
    action: str
    minutes: int
    grace_minutes: int

    @property
    def releases(self) -> bool:
        return self.action == Action.RELEASE


def site_policy() -> Policy:
    return Policy(
        settings.FAIRUSE_IDLE_ACTION,
        settings.FAIRUSE_IDLE_MINUTES,
        settings.FAIRUSE_IDLE_GRACE_MINUTES,
    )


def most_lenient(policies) -> Policy:
    rows = [Policy(p.action, p.minutes, p.grace_minutes) for p in policies]
    return min(rows, key=lambda p: (SEVERITY[p.action], -p.minutes, -p.grace_minutes))


def policy_for(reservation) -> Policy:
    host_ids = {d.host_id for d in reservation.devices.all()}
    rows = list(IdlePolicy.objects.filter(host_id__in=host_ids))
    if not rows:
        rows = list(IdlePolicy.objects.filter(group__user=reservation.owner_id))
    return most_lenient(rows) if rows else site_policy()


def any_policy_on() -> bool:
    """Whether any rule could warn about anything (asked every monitoring cycle)."""
    if settings.FAIRUSE_IDLE_ACTION != Action.OFF:
        return True
    return IdlePolicy.objects.exclude(action=Action.OFF).exists()
