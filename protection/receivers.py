"""Detection follows every monitoring cycle (no polling loop of its own)."""

from django.dispatch import receiver

from core import lease
from monitoring.signals import cycle_finished

from .detection import ACTIVITY, worth_checking


@receiver(cycle_finished, dispatch_uid="protection-check-after-cycle")
def check_after_cycle(sender, host_ids, finished_at, **kwargs):
    # Runs in the probing loop's worker: queue the work (django-q2's sync mode runs it here).
    # One task per cycle: successes are not kept in django-q2's results (its own Activity row
    # says how the last one went); failures are.
    if host_ids and worth_checking(host_ids, finished_at):
        task = "protection.detection.check_hosts"
        lease.enqueue(ACTIVITY, task, list(host_ids), task_name="protection", save=False)
