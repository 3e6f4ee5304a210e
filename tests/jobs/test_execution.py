"""Tasks run for real in GNU screen through the test sshd: start, log, exit code, signals."""

import os
import pty
import select
import shlex
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from audit.models import AuditEvent
from jobs import services
from jobs.api import attach_hint
from jobs.models import Task
from jobs.services import TaskSpec
from jobs.tasks import sync_running

from .conftest import wait_for

# Prints a line per tick, traps nothing: the default action of each signal applies.
TICKER = (
    f"{sys.executable} -u -c 'import sys, time\n"
    "for i in range(int(sys.argv[1])):\n"
    '    print("tick", i); time.sleep(0.2)\n'
    "sys.exit(int(sys.argv[2]))' {ticks} {code}"
)
# Prints a line, then waits for the file named {gate} before its last line and exit: the
# test decides when it ends, whatever the machine's load.
GATED = (
    f"{sys.executable} -u -c 'import os, sys, time\n"
    'print("before the gate")\n'
    "while not os.path.exists(sys.argv[1]): time.sleep(0.05)\n"
    'print("after the gate")\' {gate}'
)


HOUR = timedelta(hours=1)


def make_task(owner, host, template, devices=(), **parameters) -> Task:
    spec = TaskSpec(host=host, template=template, parameters=parameters, devices=list(devices))
    return services.create_job(owner, name="t", specs=[spec]).tasks.get()


def synced(task) -> Task:
    services.sync_tasks([Task.objects.select_related("host").get(pk=task.pk)])
    task.refresh_from_db()
    return task


def screen_sessions() -> str:
    return subprocess.run(["screen", "-ls"], capture_output=True, text=True).stdout


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def children_of(pid: int) -> list[int]:
    out = subprocess.run(["pgrep", "-g", str(pid)], capture_output=True, text=True).stdout
    return [int(p) for p in out.split() if int(p) != pid]


def test_it_runs_a_task_and_records_its_exit_code(runner, node, log_dir, settings):
    task = make_task(runner, node, TICKER, devices=node.devices.all(), ticks=15, code=3)
    task = services.spawn_task(task, runner)
    assert task.status == Task.Status.RUNNING
    assert task.pid and task.screen_session == f"{settings.JOBS_SESSION_PREFIX}-{task.pk}"
    assert f".{task.screen_session}\t" in screen_sessions()
    log = Path(task.log_path)
    assert log.parent == log_dir
    first = wait_for(lambda: log.read_text().count("tick"))
    later = wait_for(lambda: log.read_text().count("tick") > first and log.read_text())
    assert "tick" in later  # the log grows while it runs
    assert synced(task).status == Task.Status.RUNNING
    assert wait_for(lambda: synced(task).status == Task.Status.EXITED)
    assert task.exit_code == 3 and task.ended_at is not None
    assert "tick 14" in log.read_text()
    # The window ends with the command, and its log viewer with it: nothing of the task stays.
    assert wait_for(lambda: f".{task.screen_session}\t" not in screen_sessions())
    assert wait_for(lambda: not process_alive(task.pid) and not children_of(task.pid))
    event = AuditEvent.objects.get(action="job.run_as")
    assert event.detail["unix_user"] == task.unix_username and event.actor == runner


def read_terminal(master: int, until: bytes, seconds: float = 20.0) -> bytes:
    """What a terminal shows until ``until`` appears (or the time is up)."""
    seen, deadline = b"", time.monotonic() + seconds
    while until not in seen and time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                seen += os.read(master, 4096)
            except OSError:  # the other side closed: nothing more will come
                break
    return seen


def test_the_attach_hint_attaches_to_the_running_task(runner, node, settings):
    """The page's "Attach:" line, typed into a terminal, shows the task's output live, and
    detaching (Ctrl-a d) leaves the task running."""
    task = services.spawn_task(make_task(runner, node, TICKER, ticks=300, code=0), runner)
    hint = attach_hint(Task.objects.select_related("host").get(pk=task.pk))
    argv = shlex.split(hint)
    assert argv[:2] == ["ssh", "-t"] and argv[-2:] == ["-x", task.screen_session]
    # The user's own key and known_hosts stand in for the service's here.
    options = ["-i", str(settings.SSH_KEY_PATH), "-o", "BatchMode=yes"]
    options += ["-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null"]
    master, slave = pty.openpty()
    terminal = subprocess.Popen(
        [argv[0], *options, *argv[1:]],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        start_new_session=True,
        env={**os.environ, "TERM": "xterm"},
    )
    os.close(slave)
    try:
        shown = read_terminal(master, b"tick")
        assert b"tick" in shown, shown.decode(errors="replace")
        os.write(master, b"\x01d")  # screen's detach
        assert terminal.wait(timeout=20) == 0
    finally:
        if terminal.poll() is None:
            terminal.kill()
        os.close(master)
    assert synced(task).status == Task.Status.RUNNING  # detaching did not end it
    services.act(task, runner, "kill")
    assert wait_for(lambda: synced(task).status in Task.ENDED)


def test_the_task_sees_its_gpus_and_environment(runner, node, log_dir):
    gpus = list(node.devices.order_by("index"))
    spec = TaskSpec(
        host=node,
        template='echo "$CUDA_DEVICE_ORDER $CUDA_VISIBLE_DEVICES $RUN_NAME"',
        env={"RUN_NAME": "a b $(id)"},
        devices=gpus[1:],
    )
    task = services.create_job(runner, name="env", specs=[spec]).tasks.get()
    task = services.spawn_task(task, runner)
    assert wait_for(lambda: synced(task).status == Task.Status.EXITED)
    assert Path(task.log_path).read_text() == "PCI_BUS_ID GPU-1-uuid a b $(id)\n"
    # The audit names the variables but keeps no values (they may be tokens).
    event = AuditEvent.objects.get(action="job.run_as")
    assert "RUN_NAME" in event.detail["env_names"]
    assert "a b $(id)" not in str(event.detail)


@pytest.mark.parametrize(
    ("action", "code"), [("interrupt", 130), ("terminate", 143), ("kill", 137)]
)
def test_each_signal_really_stops_the_process(runner, node, action, code):
    task = services.spawn_task(make_task(runner, node, TICKER, ticks=600, code=0), runner)
    assert wait_for(lambda: children_of(task.pid))
    workers = children_of(task.pid)
    task = services.signal_task(task, runner, action)
    assert task.status == Task.Status.STOPPING
    assert wait_for(lambda: synced(task).status == Task.Status.KILLED)
    # sh reports a command killed by signal N as 128+N (Python's SIGINT handler: 130 too)
    assert task.exit_code == code
    assert wait_for(lambda: not any(process_alive(p) for p in workers))
    assert AuditEvent.objects.filter(action=f"job.{action}", actor=runner).exists()


def test_a_superuser_can_stop_but_not_start_a_task_of_someone_else(runner, node, admin_user):
    task = make_task(runner, node, TICKER, ticks=600, code=0)
    with pytest.raises(PermissionDenied):
        services.spawn_task(task, admin_user)
    task.refresh_from_db()
    assert task.status == Task.Status.PENDING and not task.argv
    task = services.spawn_task(task, runner)
    services.signal_task(task, admin_user, "terminate")
    assert wait_for(lambda: synced(task).status == Task.Status.KILLED)


def test_another_user_can_neither_start_nor_stop(runner, node, other_user):
    task = make_task(runner, node, TICKER, ticks=600, code=0)
    with pytest.raises(PermissionDenied):
        services.spawn_task(task, other_user)
    task = services.spawn_task(task, runner)
    with pytest.raises(PermissionDenied):
        services.signal_task(task, other_user, "kill")
    services.signal_task(task, runner, "kill")
    assert wait_for(lambda: synced(task).status == Task.Status.KILLED)


def test_a_task_that_cannot_start_says_why_and_fails(runner, node, settings):
    settings.JOBS_LOG_DIR = "/proc/no-such-dir/logs"
    task = make_task(runner, node, "true")
    with pytest.raises(ValidationError, match="could not start"):
        services.spawn_task(task, runner)
    task.refresh_from_db()
    assert task.status == Task.Status.FAILED and "screen session" in task.error


def test_the_log_is_followed_from_an_offset(client, runner, node, tmp_path):
    """The API serves the log as the workers fetch it after each cycle (with the sync),
    and once more after the end, so the pieces add up to the whole file; the log page
    follows it there."""
    gate = tmp_path / "gate"
    task = services.spawn_task(make_task(runner, node, GATED, gate=str(gate)), runner)
    client.force_login(runner)
    url = f"/api/tasks/{task.pk}/log/"
    assert client.get(url).json()["text"] == ""  # nothing fetched yet: no host asked

    def fetched():
        sync_running()
        return (p := client.get(url).json())["text"] and p

    first = wait_for(fetched)
    assert first["text"] == "before the gate\n" and not first["complete"]
    gate.touch()
    assert wait_for(lambda: sync_running() and Task.objects.get(pk=task.pk).status == "exited")
    rest = client.get(f"{url}?offset={first['next_offset']}").json()
    assert first["text"] + rest["text"] == Path(task.log_path).read_text()
    assert rest["next_offset"] == rest["size"] and rest["exit_code"] == 0 and rest["complete"]
    assert client.get(f"{url}?offset=-1").status_code == 400


def test_a_gpu_reserved_by_someone_else_now_is_refused(runner, node, other_user):
    from datetime import timedelta

    from django.utils import timezone

    from reservations.models import Reservation, ReservedDevice

    now, gpu = timezone.now(), node.devices.get(index=0)
    booking = Reservation.objects.create(
        owner=other_user,
        title="theirs",
        start=now - timedelta(minutes=5),
        end=now + timedelta(hours=1),
    )
    ReservedDevice.objects.create(
        reservation=booking, device=gpu, start=booking.start, end=booking.end
    )
    task = make_task(runner, node, "true", devices=[gpu])
    with pytest.raises(ValidationError, match="reserved by other"):
        services.spawn_task(task, runner)
    task.refresh_from_db()
    assert task.status == Task.Status.PENDING and not AuditEvent.objects.filter(action="job.run_as")
    free = make_task(runner, node, "true", devices=[node.devices.get(index=1)])
    assert services.spawn_task(free, runner).status == Task.Status.RUNNING


def test_gpus_the_owner_may_not_use_are_refused(runner, node):
    from accesscontrol.services import ban_user

    task = make_task(runner, node, "true", devices=node.devices.all())
    ban_user(runner, "hogging GPUs")
    with pytest.raises(ValidationError, match="hogging GPUs"):
        services.spawn_task(task, runner)
    task.refresh_from_db()
    assert task.status == Task.Status.PENDING


def test_a_task_attached_to_a_reservation_starts_and_stops_with_it(runner, node):
    from datetime import timedelta

    from django.utils import timezone

    from reservations.models import Reservation, ReservedDevice

    now, gpu = timezone.now(), node.devices.get(index=0)
    start, end = now + timedelta(hours=1), now + timedelta(hours=3)
    booking = Reservation.objects.create(owner=runner, title="mine", start=start, end=end)
    ReservedDevice.objects.create(reservation=booking, device=gpu, start=start, end=end)
    spec = TaskSpec(host=node, template="true", devices=[gpu], reservation=booking)
    task = services.create_job(runner, name="booked", specs=[spec]).tasks.get()
    assert (task.scheduled_start, task.scheduled_stop) == (start, end)
    other_gpu = TaskSpec(
        host=node, template="true", devices=[node.devices.get(index=1)], reservation=booking
    )
    with pytest.raises(ValidationError, match="does not book all"):
        services.create_job(runner, name="not booked", specs=[other_gpu])


def test_attached_tasks_follow_their_reservation_when_it_moves_or_is_cancelled(runner, node):
    from django.utils import timezone

    from reservations.services import (
        cancel_reservation,
        create_reservation,
        update_reservation,
    )

    gpu, now = node.devices.get(index=0), timezone.now()
    start, end = now + timedelta(hours=1), now + timedelta(hours=3)
    booking = create_reservation(runner, title="mine", devices=[gpu], start=start, end=end)
    follows = TaskSpec(host=node, template="true", devices=[gpu], reservation=booking)
    own_stop = TaskSpec(
        host=node,
        template="true",
        devices=[gpu],
        reservation=booking,
        scheduled_stop=start + timedelta(minutes=90),
    )
    job = services.create_job(runner, name="booked", specs=[follows, own_stop])
    first, second = job.tasks.order_by("pk")
    update_reservation(booking, runner, start=start + HOUR, end=end + HOUR)
    first.refresh_from_db()
    second.refresh_from_db()
    assert (first.scheduled_start, first.scheduled_stop) == (start + HOUR, end + HOUR)
    assert second.scheduled_stop == start + timedelta(minutes=90)  # its owner's own time
    cancel_reservation(booking, runner)
    for task in (first, second):
        task.refresh_from_db()
        assert task.status == Task.Status.FAILED and "was cancelled" in task.error


def test_a_running_attached_task_stops_when_its_reservation_ends_early(runner, node):
    from django.utils import timezone

    from jobs.tasks import run_due_actions
    from reservations.services import cancel_reservation, create_reservation

    gpu, start = node.devices.get(index=0), timezone.now() - timedelta(seconds=10)
    booking = create_reservation(
        runner, title="now", devices=[gpu], start=start, end=start + 2 * HOUR
    )
    spec = TaskSpec(host=node, template="sleep 600", devices=[gpu], reservation=booking)
    job = services.create_job(runner, name="r", specs=[spec])
    task = services.spawn_task(job.tasks.get(), runner)
    assert task.status == Task.Status.RUNNING
    cancel_reservation(booking, runner)  # ongoing: it ends now
    task.refresh_from_db()
    assert task.scheduled_stop <= timezone.now()
    assert "1 scheduled actions done" in run_due_actions()
    assert wait_for(lambda: synced(task).status in Task.ENDED)
