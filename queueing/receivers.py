"""What makes the scheduler run: monitoring cycles, reservation changes, queue changes.

Receivers only enqueue a django-q task (``scheduler.dispatch``), after the sender's
transaction commits, and only while the queue has something to do. Task ends need no
receiver of their own: each round first asks the hosts which queue tasks ended (jobs' sync),
and rounds follow every monitoring cycle while runs are open.
"""

from django.db import transaction
from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver

from core import lease
from monitoring.signals import cycle_finished
from reservations.models import Reservation

from .models import QueuedJob, QueueRun


def queue_has_work() -> bool:
    return (
        QueuedJob.objects.filter(state=QueuedJob.State.WAITING).exists()
        or QueueRun.objects.filter(ended_at=None).exists()
    )


def queue_dispatch() -> None:
    # The activity is scheduler.ACTIVITY (not imported: the scheduler pulls in jobs).
    lease.enqueue("queue-dispatch", "queueing.scheduler.dispatch", task_name="queue-dispatch")


@receiver(cycle_finished, dispatch_uid="queue-dispatch-after-cycle")
def dispatch_after_cycle(sender, host_ids, finished_at, **kwargs):
    # Runs in the probing loop: cheap queries, then hand the round to the workers.
    if queue_has_work():
        queue_dispatch()


def _dispatch_on_commit(**kwargs):
    if kwargs.get("raw"):
        return  # loading fixtures
    transaction.on_commit(lambda: queue_has_work() and queue_dispatch())


# A reservation's slots are written with it (and updated in bulk, without signals), so the
# reservation's own save or delete is the one event: one round per booking, not per GPU.
post_save.connect(_dispatch_on_commit, sender=Reservation, dispatch_uid="queue-Reservation-s")
post_delete.connect(_dispatch_on_commit, sender=Reservation, dispatch_uid="queue-Reservation-d")
post_save.connect(_dispatch_on_commit, sender=QueuedJob, dispatch_uid="queue-job-saved")
post_delete.connect(_dispatch_on_commit, sender=QueuedJob, dispatch_uid="queue-job-deleted")
