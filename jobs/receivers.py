"""Jobs listen to monitoring (after each probing cycle, sync tasks and run due actions) and
to reservations (attached tasks follow their reservation's times)."""

from django.db.models.signals import post_save, pre_save
from django.dispatch import receiver

from core import lease
from monitoring.signals import cycle_finished
from reservations.models import Reservation

from . import services, tasks


@receiver(cycle_finished)
def sync_after_cycle(sender, host_ids, finished_at, **kwargs):
    # The receiver runs in the probing loop: only enqueue, and only when there is work.
    if tasks.pending_sync_wanted(host_ids):
        lease.enqueue(tasks.SYNC_ACTIVITY, "jobs.tasks.after_cycle", sorted(host_ids))


@receiver(pre_save, sender=Reservation, dispatch_uid="jobs-reservation-times-before")
def remember_reservation_times(sender, instance, raw=False, **kwargs):
    # The times before the save tell which tasks took theirs from the reservation.
    if raw or instance.pk is None:
        return
    before = Reservation.objects.filter(pk=instance.pk).values_list("start", "end").first()
    instance._times_before = before


@receiver(post_save, sender=Reservation, dispatch_uid="jobs-follow-reservation")
def attached_tasks_follow(sender, instance, created, raw=False, **kwargs):
    before = getattr(instance, "_times_before", None)
    if raw or created or before is None:
        return
    services.follow_reservation(instance, *before)
