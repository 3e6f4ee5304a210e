"""The fair-use schedules are registered once by `serve`, and each records how it went."""

from django_q.models import Schedule

from accounting import schedules as accounting
from core.models import Activity
from monitoring.management.commands.serve import ensure_app_schedules
from notifications import schedules as notifications
from queueing import schedules as queueing


def test_the_schedules_are_registered_once_and_record_their_runs(db):
    ensure_app_schedules()
    ensure_app_schedules()
    mine = {**accounting.SCHEDULES, **queueing.SCHEDULES}
    assert Schedule.objects.filter(name__in=mine).count() == 2
    # Retries are the notifications sender's now (notifications.sender): the old schedule goes.
    assert not Schedule.objects.filter(name__in=notifications.OLD_SCHEDULES).exists()
    for run, activity in [
        (accounting.run_rollup, accounting.ACTIVITY),
        (queueing.run_waiting_notices, queueing.ACTIVITY),
    ]:
        run()
        assert Activity.objects.get(name=activity).last_success_at is not None
