"""A host dies with a running task: only that task waits; every other host's tasks log and end
as if nothing happened, and the dead host's task goes on where it was when the host is back.

Before, one host that could not be asked ended the whole sync ("sync failed: node-2: ...")
before any log was fetched: no log on any host moved while a dead host held a running task.
"""

import shlex
import sys
import time

import pytest

from core.models import Activity
from jobs import services, tasks
from jobs.api import TaskSerializer
from jobs.models import Task
from monitoring.models import Host
from tests.jobs.conftest import _empty_broker, _fresh_job_connections, log_dir, runner  # noqa: F401
from tests.jobs.test_execution import make_task
from tests.monitoring.conftest import make_host, sshd  # noqa: F401
from tests.monitoring.test_ssh_probe import UUID0, UUID1, gpu_row

pytestmark = pytest.mark.django_db(transaction=True)

# Prints a line, waits for the file named {gate}, prints its last line and exits {code}: the
# test decides when each task ends, whatever the machine's load.
GATED = (
    f"{shlex.quote(sys.executable)} -u -c 'import os, sys, time\n"
    'print("before the gate")\n'
    "while not os.path.exists(sys.argv[1]): time.sleep(0.05)\n"
    'print("after the gate"); sys.exit(int(sys.argv[2]))\' {gate} {code}'
)


def cycles_until(loop, done, seconds=40):
    """Real probing cycles, each followed by the sync the workers would run, until done()."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        started = time.monotonic()
        loop.cycle()
        tasks.after_cycle()
        if done():
            return
        time.sleep(max(0.0, loop.interval - (time.monotonic() - started)))
    raise AssertionError(f"not done after {seconds}s: {Task.objects.values('pk', 'status')}")


def status(host: Host) -> str:
    return Host.objects.get(pk=host.pk).status


def task(pk: int) -> Task:
    return Task.objects.select_related("host", "stored_log").get(pk=pk)


def log_text(pk: int) -> str:
    stored = getattr(task(pk), "stored_log", None)
    return bytes(stored.text).decode() if stored else ""


def test_a_dead_host_holds_up_only_its_own_task(loop, mortal_sshd, sshd, gpus, runner, tmp_path):  # noqa: F811
    dying = make_host(mortal_sshd, "node-2", "127.0.0.2")
    steady = make_host(sshd, "node-3", "127.0.0.3")
    gpus("127.0.0.2").set_gpus([gpu_row(0, UUID0)])
    gpus("127.0.0.3").set_gpus([gpu_row(0, UUID1)])
    cycles_until(loop, lambda: status(dying) == status(steady) == Host.Status.UP)

    gates = {name: tmp_path / f"gate-{name}" for name in ("dying", "steady")}
    stranded = services.spawn_task(
        make_task(runner, dying, GATED, gate=gates["dying"], code=4), runner
    )
    other = services.spawn_task(
        make_task(runner, steady, GATED, gate=gates["steady"], code=3), runner
    )
    cycles_until(loop, lambda: all("before the gate" in log_text(t.pk) for t in (stranded, other)))

    # The host dies. The loop has not noticed yet: the sync asks it, fails, and goes on.
    mortal_sshd.stop()
    summary = tasks.after_cycle()
    assert "1 host could not be asked" in summary, summary
    assert Activity.objects.get(name=tasks.SYNC_ACTIVITY).last_error.startswith("node-2: ")
    assert Activity.objects.get(name="jobs-logs").last_error.startswith("node-2: ")

    # The other host's task logs and ends as if nothing happened.
    gates["steady"].touch()
    cycles_until(loop, lambda: task(other.pk).status == Task.Status.EXITED)
    ended = task(other.pk)
    assert ended.exit_code == 3 and ended.stored_log.complete
    assert log_text(other.pk) == "before the gate\nafter the gate\n"

    # The loop marked the dead host unreachable: its task waits, is not running, costs no SSH.
    cycles_until(loop, lambda: status(dying) == Host.Status.UNREACHABLE)
    waiting = task(stranded.pk)
    assert waiting.status == Task.Status.RUNNING  # as far as anyone knows
    assert waiting.host_unreachable_since == waiting.host.last_seen is not None
    assert TaskSerializer(waiting).data["host_unreachable_since"] is not None
    assert waiting.job.status == "host unreachable"
    failed_at = Activity.objects.get(name=tasks.SYNC_ACTIVITY).last_error_at
    assert "1 task waits for unreachable host (node-2)" in tasks.after_cycle()
    assert Activity.objects.get(name=tasks.SYNC_ACTIVITY).last_error_at == failed_at
    assert not tasks.pending_sync_wanted([dying.pk])

    # Back: the task was running all along; it resumes, then ends and is recorded whole.
    mortal_sshd.start()
    cycles_until(loop, lambda: status(dying) == Host.Status.UP)
    resumed = task(stranded.pk)
    assert resumed.status == Task.Status.RUNNING and resumed.host_unreachable_since is None
    gates["dying"].touch()
    cycles_until(loop, lambda: task(stranded.pk).status == Task.Status.EXITED)
    assert task(stranded.pk).exit_code == 4
    assert log_text(stranded.pk) == "before the gate\nafter the gate\n"
