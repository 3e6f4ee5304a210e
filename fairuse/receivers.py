"""Idle checks follow every monitoring cycle (no polling loop of their own)."""

from django.dispatch import receiver

from core import lease
from monitoring.signals import cycle_finished

from .idle import ACTIVITY, worth_checking


@receiver(cycle_finished, dispatch_uid="fairuse-idle-after-cycle")
def check_idle_after_cycle(sender, host_ids, finished_at, **kwargs):
    # Runs in the probing loop: cheap queries here, the work in a worker task.
    if host_ids and worth_checking(host_ids, finished_at):
        lease.enqueue(ACTIVITY, "fairuse.idle.check_hosts", list(host_ids), save=False)
