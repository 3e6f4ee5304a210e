"""Status sync: after monitoring cycles, from a fresh process, and scheduled starts/stops."""

import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone
from django_q.brokers import get_broker
from django_q.signing import SignedPackage

from core.models import Activity
from jobs import remote, services, tasks
from jobs.models import Task
from jobs.services import TaskSpec
from monitoring.models import Host
from monitoring.signals import cycle_finished
from reservations.models import Reservation, ReservedDevice
from tests.realparts import children
from tests.security.conftest import database_url

from .conftest import wait_for
from .test_execution import TICKER, make_task, synced

ROOT = Path(__file__).resolve().parents[2]
IGNORES_TERM = (
    f"{sys.executable} -u -c 'import signal, time\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    'print("ignoring TERM")\n'
    "time.sleep(600)'"
)


# Runs until the file named by its argument exists, then exits 7.
GATED = (
    f"{sys.executable} -u -c 'import os, sys, time\n"
    "while not os.path.exists(sys.argv[1]): time.sleep(0.1)\n"
    "sys.exit(7)' {release}"
)


def syncjobs_in_a_new_process(settings) -> str:
    """`manage.py syncjobs` as a restarted service would run it: same database, no state."""
    env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "HIVE_DATA_DIR": str(settings.HIVE_DATA_DIR),
        "JOBS_LOG_DIR": settings.JOBS_LOG_DIR,
    }
    out = subprocess.run(
        [sys.executable, "manage.py", "syncjobs"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.mark.django_db(transaction=True)
def test_a_restarted_service_finds_its_running_tasks_again(runner, node, settings, tmp_path):
    # The program ends only when the test says so: a slow restart must not outlive it.
    release = tmp_path / "release"
    task = services.spawn_task(make_task(runner, node, GATED, release=str(release)), runner)
    remote.close_all()  # the old service is gone; nothing of it is left in memory
    assert "1 active tasks checked, 0 ended" in syncjobs_in_a_new_process(settings)
    task.refresh_from_db()
    assert task.status == Task.Status.RUNNING
    release.touch()
    exit_file = Path(task.log_path).with_suffix(".exit")
    assert wait_for(lambda: exit_file.exists(), timeout=30)
    assert "1 active tasks checked, 1 ended" in syncjobs_in_a_new_process(settings)
    task.refresh_from_db()
    assert task.status == Task.Status.EXITED and task.exit_code == 7
    # The file holds the code; the end is when it was written, as the host's clock tells it.
    assert exit_file.read_text() == "7\n"
    assert task.ended_at.timestamp() == int(exit_file.stat().st_mtime)


def wait_and_record(task, seconds, then=()) -> tuple[bool, str | None]:
    """(whether the task ended during the wait and was recorded so, ``then``'s output)."""
    state, then_out = services.await_end(task, seconds, then)
    return (state is not None and services.record_end(task, state)), then_out


@pytest.mark.parametrize("fifo", [True, False], ids=["woken-by-fifo", "polling-without-fifo"])
def test_waiting_on_the_host_records_the_end_the_moment_the_exit_file_appears(
    runner, node, tmp_path, fifo
):
    release = tmp_path / "release"
    task = services.spawn_task(make_task(runner, node, GATED, release=str(release)), runner)
    done = Path(task.log_path).with_suffix(".done")
    assert not done.exists()  # the first wait makes the FIFO, not the start
    if not fifo:  # as where mkfifo fails
        done.mkdir()
    assert wait_and_record(task, seconds=0.3) == (False, None)  # running
    assert done.is_fifo() == fifo
    task.refresh_from_db()
    assert task.status == Task.Status.RUNNING
    release.touch()
    assert wait_and_record(task, seconds=30, then=["echo", "next"]) == (
        True,
        "next\n",
    )
    task.refresh_from_db()
    assert task.status == Task.Status.EXITED and task.exit_code == 7
    written = Path(task.log_path).with_suffix(".exit").stat().st_mtime
    assert abs(task.ended_at.timestamp() - written) < 5
    # A command run after the end that fails gives no output to trust; an end found there
    # before the wait is dated by its exit file.
    state, then_out = remote.wait_for_exit(
        node, task.unix_username, task.session_name, 1, ["sh", "-c", "echo half; exit 3"]
    )
    assert state.exit_code == 7 and then_out is None
    assert state.ended_at.timestamp() == int(written)


def test_the_waiter_answers_at_the_end_not_when_its_timer_runs_out(tmp_path):
    """The wait sleeps in the shell's read with a timer beside it; the window's line wakes it,
    and the timer's sleep, left to run out, holds none of the call's output (a caller
    reading to the end of it, as the local transport does, would wait for it)."""
    os.mkfifo(tmp_path / "t.done")
    argv = ["sh", "-c", remote.WAIT_EXIT, "sh", str(tmp_path), "t", "120", "2400", "echo", "x"]
    waiter = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    try:
        # In its read once its timer runs: the first process it starts (the rest are built-ins).
        assert wait_for(lambda: children(waiter.pid))
        (tmp_path / "t.exit").write_text("3\n")
        with open(tmp_path / "t.done", "w") as line:  # as the window writes it
            line.write("1\n")
        out, _ = waiter.communicate(timeout=60)  # the timer has 120 s left
    finally:
        waiter.kill()
    assert out == "3\n--then--\nx\n--then-status 0\n"


def test_a_session_that_vanished_without_exit_code_is_marked_failed(runner, node):
    task = services.spawn_task(make_task(runner, node, TICKER, ticks=600, code=0), runner)
    subprocess.run(["screen", "-S", task.screen_session, "-X", "quit"], check=True)
    assert wait_for(lambda: synced(task).status == Task.Status.FAILED)
    assert "without an exit code" in task.error


def queued_funcs(broker) -> list[str]:
    """The functions waiting in the task queue (ORM or Redis), taking them off it."""
    funcs = []
    while batch := broker.dequeue():
        funcs += [SignedPackage.loads(payload)["func"] for _, payload in batch]
    return funcs


def test_a_monitoring_cycle_enqueues_a_sync_only_when_there_is_work(runner, node):
    broker = get_broker()
    broker.purge_queue()
    cycle_finished.send(sender=None, host_ids=[node.pk], finished_at=timezone.now())
    assert "jobs.tasks.after_cycle" not in queued_funcs(broker)
    task = services.spawn_task(make_task(runner, node, TICKER, ticks=600, code=0), runner)
    cycle_finished.send(sender=None, host_ids=[node.pk], finished_at=timezone.now())
    assert queued_funcs(broker).count("jobs.tasks.after_cycle") == 1
    services.signal_task(task, runner, "kill")
    assert wait_for(lambda: tasks.after_cycle([node.pk]) and synced(task).is_active is False)
    assert Activity.objects.get(name=tasks.SYNC_ACTIVITY).last_success_at is not None
    broker.purge_queue()


def test_an_unreachable_host_is_recorded_as_a_sync_failure(runner, node, sshd):
    task = services.spawn_task(make_task(runner, node, TICKER, ticks=600, code=0), runner)
    Task.objects.filter(pk=task.pk).update(unix_username="nobody-here")
    assert "1 host could not be asked" in tasks.sync_running()
    activity = Activity.objects.get(name=tasks.SYNC_ACTIVITY)
    assert "nobody-here" in activity.last_error and activity.last_error.startswith("node-2: ")
    Task.objects.filter(pk=task.pk).update(unix_username=task.unix_username)
    services.signal_task(Task.objects.get(pk=task.pk), runner, "kill")


def test_scheduled_start_then_graceful_stop_then_kill(runner, node, settings):
    settings.JOBS_STOP_GRACE_SECONDS = 0
    now = timezone.now()
    spec = TaskSpec(host=node, template=IGNORES_TERM, scheduled_start=now + timedelta(hours=1))
    task = services.create_job(runner, name="later", specs=[spec]).tasks.get()
    tasks.run_due_actions()
    task.refresh_from_db()
    assert task.status == Task.Status.PENDING  # not yet
    Task.objects.filter(pk=task.pk).update(scheduled_start=now, scheduled_stop=now)
    Task.objects.filter(pk=task.pk).update(scheduled_stop=now + timedelta(hours=1))
    assert tasks.run_due_actions().startswith("1 scheduled actions done")
    task.refresh_from_db()
    assert task.status == Task.Status.RUNNING
    assert wait_for(lambda: "ignoring TERM" in Path(task.log_path).read_text())
    Task.objects.filter(pk=task.pk).update(scheduled_stop=timezone.now())
    tasks.run_due_actions()  # SIGTERM, which it ignores
    task.refresh_from_db()
    assert task.status == Task.Status.STOPPING and task.kill_at is not None
    assert synced(task).status == Task.Status.STOPPING
    tasks.run_due_actions()  # the grace period (0 s) is over: SIGKILL
    assert wait_for(lambda: synced(task).status == Task.Status.KILLED)
    assert task.exit_code == 137
    assert [e.action for e in task_events(task)] == ["job.run_as", "job.terminate", "job.kill"]


def task_events(task):
    from audit.models import AuditEvent

    return AuditEvent.objects.filter(target=str(task)).order_by("pk")


def test_a_refused_scheduled_start_fails_the_task_and_is_recorded(runner, node, other_user):
    now = timezone.now()
    gpu = node.devices.first()
    booking = Reservation.objects.create(
        owner=other_user, title="mine", start=now - timedelta(hours=1), end=now + timedelta(hours=1)
    )
    ReservedDevice.objects.create(
        reservation=booking, device=gpu, start=booking.start, end=booking.end
    )
    spec = TaskSpec(host=node, template="true", devices=[gpu], scheduled_start=now)
    task = services.create_job(runner, name="clash", specs=[spec]).tasks.get()
    assert "1 failed" in tasks.run_due_actions()
    task.refresh_from_db()
    assert task.status == Task.Status.FAILED and "reserved by other" in task.error
    assert "reserved by other" in Activity.objects.get(name=tasks.SCHEDULE_ACTIVITY).last_error


def test_an_unexpected_error_in_one_scheduled_start_is_recorded_and_the_next_still_runs(
    runner, node, log_dir
):
    now = timezone.now()
    specs = [TaskSpec(host=node, template="true", scheduled_start=now) for _ in range(2)]
    broken, fine = services.create_job(runner, name="two", specs=specs).tasks.order_by("pk")
    # A row edited by hand (raw JSON in the admin) that no service would have written.
    Task.objects.filter(pk=broken.pk).update(env="not an object")
    assert "1 scheduled actions done, 1 failed" in tasks.run_due_actions()
    error = Activity.objects.get(name=tasks.SCHEDULE_ACTIVITY).last_error
    assert f"task {broken.pk}: " in error and "Error" in error
    fine.refresh_from_db()
    assert fine.status != Task.Status.PENDING  # started: the broken one did not stop the round
    assert wait_for(lambda: synced(fine).status in Task.ENDED)


@pytest.mark.parametrize("stop_requested, expected", [(True, "killed"), (False, "exited")])
def test_a_stop_landing_during_a_sync_round_still_counts_as_killed(owner, stop_requested, expected):
    """The sync reads its tasks, then waits on SSH; a stop requested meanwhile must win."""
    host = Host.objects.create(name="race", address="127.0.0.1")
    task = make_task(owner, host, "sleep 60")
    Task.objects.filter(pk=task.pk).update(status=Task.Status.RUNNING)
    read_by_sync = Task.objects.get(pk=task.pk)  # what the sync holds: no stop requested yet
    if stop_requested:
        Task.objects.filter(pk=task.pk).update(stop_requested_at=timezone.now())
    ended = remote.SessionState(alive=False, exit_code=143, ended_at=timezone.now())
    assert services.record_end(read_by_sync, ended)
    task.refresh_from_db()
    assert (task.status, task.exit_code) == (expected, 143)
