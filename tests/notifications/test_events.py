"""Events told through the channels: a job's end (with exit codes), a queued job's start;
each once. (Idle warnings: tests/fairuse.)"""

from datetime import timedelta

import pytest
from django.utils import timezone
from django_q.conf import Conf

from jobs import services as job_services
from jobs.models import Job, Task
from monitoring.models import Device, Host
from notifications.models import Channel, Delivery
from notifications.send import send_due
from queueing.models import QueuedJob, QueueRun
from queueing.scheduler import tell_started


@pytest.fixture
def inline(monkeypatch):
    monkeypatch.setattr(Conf, "SYNC", True)


@pytest.fixture
def hook(receiver, owner):
    return Channel.objects.create(user=owner, kind="json", target=receiver.url)


@pytest.fixture
def job(owner):
    host = Host.objects.create(name="node-1", address="10.0.0.1")
    Device.objects.create(host=host, index=0, uuid="GPU-0")
    job = Job.objects.create(owner=owner, name="sweep")
    for _ in range(2):
        Task.objects.create(job=job, host=host, template="t", command="t",
                            status=Task.Status.RUNNING)  # fmt: skip
    return job


def test_a_job_is_told_ended_once_its_last_task_ended(inline, hook, receiver, job):
    first, second = job.tasks.all()
    job_services._finish(first, Task.Status.EXITED, exit_code=0)
    assert send_due() == 0  # the other task still runs
    job_services._finish(second, Task.Status.EXITED, exit_code=3)
    job_services._finish(second, Task.Status.EXITED, exit_code=3)  # seen again: no effect
    assert send_due() == 1
    ((_, body),) = receiver.received
    assert body["event"] == "job_ended" and "'sweep' ended: failed" in body["subject"]
    assert f"task {first.pk} on node-1: exit code 0" in body["text"]
    assert f"task {second.pk} on node-1: exit code 3" in body["text"]
    assert body["link"].endswith(f"/jobs/{job.pk}/")


def test_a_queued_jobs_start_is_told(hook, receiver, job, owner):
    waited = timezone.now() - timedelta(minutes=42)
    queued = QueuedJob.objects.create(owner=owner, name="sweep", enqueued_at=waited)
    job.tasks.first().devices.set(Device.objects.all())
    run = QueueRun.objects.create(queued_job=queued, job=job, gpus=1)
    assert tell_started(run.pk) == 1
    assert tell_started(run.pk) == 0  # a retry of the task tells nobody twice
    assert send_due() == 1
    ((_, body),) = receiver.received
    assert body["event"] == "queued_started"
    assert body["text"] == "'sweep' started on node-1:0 after waiting 42 min."
    assert Delivery.objects.count() == 1


def test_a_booking_reminder_reaches_chat_too_once(receiver, owner, settings):
    from reservations import notifications as reminders
    from reservations.models import Reservation

    settings.RESERVATION_REMIND_START_MINUTES = 30
    Channel.objects.create(
        user=owner, kind="mattermost", target=receiver.url, events=["booking_starts"]
    )
    start = timezone.now() + timedelta(minutes=10)
    Reservation.objects.create(
        owner=owner, title="run", start=start, end=start + timedelta(hours=1)
    )
    assert reminders.send_due()["starts"] == 1
    assert reminders.send_due()["starts"] == 0
    assert send_due() == 1
    ((_, body),) = receiver.received
    assert body["text"].startswith("Your reservation 'run' starts soon\n'run' starts")


def test_a_long_wait_is_told_once_with_its_reasons(hook, receiver, owner, other_user, settings):
    from queueing.schedules import tell_long_waits

    settings.QUEUE_NOTIFY_WAITING_HOURS = 6
    long_ago = timezone.now() - timedelta(hours=7)
    QueuedJob.objects.create(owner=owner, name="big", enqueued_at=long_ago,
                             reasons=["no host has 8 GPUs"])  # fmt: skip
    QueuedJob.objects.create(owner=owner, name="recent")
    assert tell_long_waits() == 1
    assert tell_long_waits() == 0
    assert send_due() == 1
    ((_, body),) = receiver.received
    assert body["event"] == "queued_waiting"
    assert body["text"] == (
        "'big' has waited more than 6 hours. Why, as of the last round:\n- no host has 8 GPUs"
    )
