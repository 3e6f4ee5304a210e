"""gpurun's job is told ended once, at the real end of the run: not at a gap between two
commands (all its tasks ended, the next not yet come), also when gpurun ends with an error, is
interrupted, or is killed outright (then by the service's sync once its feed lapsed). Real
sshd and screen, as in test_gpurun; the notice goes to a real webhook receiver."""

import _thread
import io
import os
import signal
import subprocess
import sys
import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone
from django_q.conf import Conf

from jobs.models import Job, Task
from jobs.tasks import after_cycle, pending_sync_wanted, tell_job_ended
from monitoring.models import Host
from notifications.models import Channel, Delivery
from notifications.send import send_due
from queueing import gpurun as runner_module
from tests.notifications.conftest import receiver  # noqa: F401 (fixture)
from tests.security.conftest import database_url

from .conftest import wait_for
from .test_gpurun import ROOT, gpurun

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def inline(monkeypatch):
    """Work handed to the workers (the end of a job's last task tells it) runs at once."""
    monkeypatch.setattr(Conf, "SYNC", True)


@pytest.fixture
def hook(receiver, runner):  # noqa: F811
    return Channel.objects.create(user=runner, kind="json", target=receiver.url)


def ended(count: int) -> bool:
    return Task.objects.filter(status__in=Task.ENDED).count() == count


def told_once(receiver, job: Job, tasks: int) -> None:  # noqa: F811
    """Exactly one "job ended" was recorded and sent, naming each of the job's tasks."""
    assert Delivery.objects.filter(event="job_ended").count() == 1
    assert send_due() == 1
    ((_, body),) = receiver.received
    assert body["event"] == "job_ended" and body["key"] == f"job-{job.pk}-ended"
    assert len(body["text"].splitlines()) == tasks


def test_a_gap_between_two_commands_is_not_the_end(
    runner,
    real_nodes,
    hook,
    receiver,  # noqa: F811
    inline,
    monkeypatch,
):
    """One command, a gap (longer than one renewal of the feed), then one that fails: no
    notice at the gap from any path that tells a job's end, one when gpurun returns."""
    node2, _ = real_nodes
    monkeypatch.setattr(runner_module, "RENEW_FEED", timedelta(0))  # renewed each half second
    read_end, write_end = os.pipe()
    feed, reader, result = os.fdopen(write_end, "w", buffering=1), os.fdopen(read_end), {}

    def run_gpurun():
        try:
            result["out"] = gpurun(reader, gpus="0")
        finally:
            connection.close()  # this thread's (gpurun's main thread)

    thread = threading.Thread(target=run_gpurun)
    thread.start()
    try:
        feed.write("echo first\n")
        assert wait_for(lambda: ended(1), 60)
        job = Job.objects.get()
        first_feed = job.fed_until
        assert first_feed > timezone.now()
        assert wait_for(lambda: Job.objects.get().fed_until > first_feed, 30)  # renewed
        # The recorded end told nothing (run inline), nor does a retry or the service's sync.
        assert tell_job_ended(job.pk) == 0
        after_cycle([node2.pk])
        assert not Delivery.objects.exists()
        feed.write("exit 3\n")
    finally:
        feed.close()
        thread.join(60)
    output, code = result["out"]
    assert code == 1 and "gpurun: 2 commands run, 1 failed" in output, output
    job.refresh_from_db()
    assert job.fed_until is None
    told_once(receiver, job, tasks=2)
    assert "Your job 'gpurun on node-2' ended: failed" in receiver.received[0][1]["subject"]
    after_cycle([node2.pk])
    assert tell_job_ended(job.pk) == 0 and Delivery.objects.count() == 1


def test_an_interrupted_gpurun_is_told_ended_when_its_stopped_task_ends(
    runner,
    real_nodes,
    hook,
    receiver,  # noqa: F811
    inline,
):
    """A gap, then Ctrl-C while the next command runs: gpurun stops it and returns; the
    job's end is told once, with both tasks, when the stopped one has ended (seen by gpurun
    before it returned, or by the service's sync)."""
    node2, _ = real_nodes
    gpu = runner_module.Runner(node2, runner, [node2.devices.get(index=0)], io.StringIO())
    read_end, write_end = os.pipe()
    feed, reader = os.fdopen(write_end, "w", buffering=1), os.fdopen(read_end)

    returned = threading.Event()

    def then_ctrl_c_once_running():
        try:
            if wait_for(lambda: ended(1), 120):  # the gap
                feed.write("sleep 60\n")
                if wait_for(lambda: Task.objects.filter(status=Task.Status.RUNNING).exists(), 120):
                    _thread.interrupt_main()  # as a Ctrl-C reaches gpurun's main thread
                    returned.wait(120)
        finally:
            connection.close()  # this thread's
            if not returned.is_set():  # gpurun would wait for input for ever: end it,
                feed.close()  # and the test fails below rather than hanging

    feed.write("true\n")
    # Ctrl-C as in gpurun's own process: a test before this one in the same process may
    # have left another SIGINT handler (django-q's cluster code installs one).
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    threading.Thread(target=then_ctrl_c_once_running, daemon=True).start()
    try:
        assert gpu.run(reader) == 130
    finally:
        returned.set()
        signal.signal(signal.SIGINT, previous)
        feed.close()
    job = Job.objects.get()
    assert job.fed_until is None
    assert wait_for(lambda: after_cycle([node2.pk]) and ended(2), 60)
    told_once(receiver, job, tasks=2)


def test_a_gpurun_killed_outright_is_told_ended_by_the_sync_after_its_feed_lapsed(
    runner,
    real_nodes,
    hook,
    receiver,  # noqa: F811
    inline,
    settings,
):
    """SIGKILL at a gap: nothing is told while the feed holds; once it lapsed, the next sync
    tells the end, once."""
    node2, _ = real_nodes
    # Without Redis, what this gpurun queues for the workers stays in the test's database.
    env = {
        **{k: v for k, v in os.environ.items() if k != "REDIS_URL"},
        "DATABASE_URL": database_url(),
        "HIVE_DATA_DIR": str(settings.HIVE_DATA_DIR),
        "JOBS_LOG_DIR": settings.JOBS_LOG_DIR,
        "JOBS_SESSION_PREFIX": settings.JOBS_SESSION_PREFIX,
    }
    argv = [sys.executable, "manage.py", "gpurun", "--gpus", "0", "--host", "node-2"]
    gpurun_process = subprocess.Popen(
        [*argv, "--user", runner.username],
        cwd=ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    try:
        gpurun_process.stdin.write("true\n")
        gpurun_process.stdin.flush()
        assert wait_for(lambda: ended(1), 60)
    finally:
        gpurun_process.send_signal(signal.SIGKILL)
        gpurun_process.wait(10)
        gpurun_process.stdin.close()
    job = Job.objects.get()
    assert job.fed_until > timezone.now()
    after_cycle([node2.pk])
    assert tell_job_ended(job.pk) == 0 and not Delivery.objects.exists()
    # The feed lapses (FEED without a renewal), as if that time had passed.
    Job.objects.filter(pk=job.pk).update(fed_until=timezone.now() - timedelta(seconds=1))
    assert pending_sync_wanted([node2.pk])  # the probing loop hands the sync its work
    assert f"told the end of job {job.pk} (gpurun stopped feeding)" in after_cycle([node2.pk])
    job.refresh_from_db()
    assert job.fed_until is None and not pending_sync_wanted([node2.pk])
    told_once(receiver, job, tasks=1)
    after_cycle([node2.pk])
    assert Delivery.objects.count() == 1


def test_an_ordinary_job_is_told_ended_as_before(owner, inline):
    """A job gpurun never fed (or no longer feeds) is told at its last task's end."""
    host = Host.objects.create(name="node-1", address="10.0.0.1")
    job = Job.objects.create(owner=owner, name="sweep")
    Task.objects.create(job=job, host=host, template="t", command="t", status=Task.Status.EXITED,
                        exit_code=0)  # fmt: skip
    Channel.objects.create(user=owner, kind="json", target="http://127.0.0.1:9/")
    Job.objects.filter(pk=job.pk).update(fed_until=timezone.now() + timedelta(minutes=1))
    assert tell_job_ended(job.pk) == 0  # fed: a gap
    Job.objects.filter(pk=job.pk).update(fed_until=None)
    assert tell_job_ended(job.pk) == 1
    assert tell_job_ended(job.pk) == 0  # once
