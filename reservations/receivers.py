"""Reactions to other apps' signals."""

from django.dispatch import receiver

from accesscontrol.signals import grants_changed
from core import lease

from .tasks import RECHECK_ACTIVITY


@receiver(grants_changed)
def recheck_after_grants_changed(sender, user_ids, reason, **kwargs):
    # Sent after commit, inside the admin's request: hand the work to the workers.
    task = "reservations.tasks.recheck_reservations"
    lease.enqueue(RECHECK_ACTIVITY, task, sorted(user_ids), reason)
