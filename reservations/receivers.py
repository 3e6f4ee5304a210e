"""Reactions to other apps' signals."""

from django.dispatch import receiver
from django_q.tasks import async_task

from accesscontrol.signals import grants_changed


@receiver(grants_changed)
def recheck_after_grants_changed(sender, user_ids, reason, **kwargs):
    # Sent after commit, inside the admin's request: hand the work to the workers.
    async_task("reservations.tasks.recheck_reservations", sorted(user_ids), reason)
