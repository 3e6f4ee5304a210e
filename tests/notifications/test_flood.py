"""One user's hanging webhooks slow nobody else: 40 channels to a webhook that accepts and
never answers, three of that user's jobs ending, and another user's queued job still starts
while those deliveries are outstanding. The sender is the real one (notifications.sender),
run on threads here rather than in the supervisor's forked process."""

import threading

import pytest
from django.db import connection

from jobs import services as job_services
from jobs.models import Job, Task
from notifications.models import Channel, Delivery
from notifications.sender import Sender
from queueing.models import QueuedJob
from tests.queueing.conftest import (  # noqa: F401  (fixtures)
    fake_gpu_root,
    gpus,
    log_dir,
    other_runner,
    queue,
    real_nodes,
    real_processes,
    runner,
    sshd,
    wait_for,
)

pytestmark = pytest.mark.django_db(transaction=True)
State = Delivery.State


@pytest.fixture
def sender(settings, silent):
    settings.NOTIFY_SEND_TIMEOUT = 60  # the silent webhook holds each send this long
    sender, stop = Sender(threads=4, per_user=2), threading.Event()
    thread = threading.Thread(target=sender.run, args=(stop,))
    thread.start()
    yield sender
    stop.set()
    thread.join(timeout=10)
    silent.close()  # what it still held fails now: the sending threads end
    sender.pool.shutdown(wait=True)


def end_jobs(owner, host, count) -> None:
    """``count`` of the owner's jobs end, as the sync sees them (tasks run inline)."""
    try:
        for n in range(count):
            job = Job.objects.create(owner=owner, name=f"sweep-{n}")
            task = Task.objects.create(job=job, host=host, template="t", command="t",
                                       status=Task.Status.RUNNING)  # fmt: skip
            job_services._finish(task, Task.Status.EXITED, exit_code=0)
    finally:
        connection.close()  # this thread's own


def test_hanging_webhooks_do_not_hold_up_another_users_job(
    runner,  # noqa: F811  (fixtures)
    other_runner,  # noqa: F811
    real_nodes,  # noqa: F811
    silent,
    sender,
    tasks_run_inline,
):
    for _ in range(40):
        Channel.objects.create(user=runner, kind="json", target=silent.url)
    ending = threading.Thread(target=end_jobs, args=(runner, real_nodes[0], 3))
    ending.start()
    ending.join(timeout=30)
    assert not ending.is_alive(), "ending a job waited for its owner's webhooks"
    hooks = Delivery.objects.filter(channel__user=runner)
    assert hooks.count() == 120, list(Delivery.objects.values_list("event", "channel__user"))
    assert wait_for(lambda: silent.open >= 2, 15)  # the sender holds the webhook's sends
    # Another user queues a short job: the round its queueing asks for (run inline) starts it
    short = queue(other_runner, "short", {"template": "sleep 2"})
    short.refresh_from_db()
    assert short.state == QueuedJob.State.RUNNING
    # ... while the hanging deliveries are still outstanding, at most the user's share.
    assert hooks.filter(state=State.SENDING).count() == 2 == silent.open
    assert hooks.filter(state=State.PENDING).count() == 118
    assert sender.outstanding() == 2
    silent.close()  # the webhook goes away: the held sends end, as failures
    assert wait_for(lambda: sender.outstanding() == 0, 15)
