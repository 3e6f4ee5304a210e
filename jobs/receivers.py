"""Jobs listen to monitoring: after each probing cycle, sync tasks and run due actions."""

from django.dispatch import receiver

from monitoring import lease
from monitoring.signals import cycle_finished

from . import tasks


@receiver(cycle_finished)
def sync_after_cycle(sender, host_ids, finished_at, **kwargs):
    # The receiver runs in the probing loop: only enqueue, and only when there is work.
    if tasks.pending_sync_wanted(host_ids):
        lease.enqueue(tasks.SYNC_ACTIVITY, "jobs.tasks.after_cycle", sorted(host_ids))
