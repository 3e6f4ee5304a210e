"""A worker is killed (SIGKILL) while it launches a task: the task is never lost, never started
twice. The worker is `manage.py syncjobs` in a process of its own (what a django-q worker runs
after a cycle: sync, then the scheduled starts that are due) against the test database; the
task runs in real GNU screen through a real sshd. The kill lands at chosen moments, held there
by real means: the sshd frozen (SIGSTOP) so the start waits for its greeting, or another
database client holding the task's row so the "running" update waits."""

import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest
from django.db import connection
from django.utils import timezone

from audit.models import AuditEvent
from core.models import Activity
from jobs import services, tasks
from jobs.models import Task
from jobs.services import TaskSpec
from tests.jobs.conftest import (  # noqa: F401 (fixtures)
    _fresh_job_connections,
    log_dir,
    runner,
    task_sessions,
    wait_for,
)
from tests.jobs.test_sync import database_url
from tests.monitoring.conftest import make_host
from tests.realparts import require

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT = 2  # JOBS_START_TIMEOUT of the recovering process (production: 150 s)

# Notes each start in a file of its own (a second start would add a line), then runs until
# the release file exists and exits 7.
NOTES_ITS_STARTS = (
    f"{sys.executable} -u -c 'import os, sys, time\n"
    'open(sys.argv[1], "a").write("started\\n")\n'
    'print("running")\n'
    "while not os.path.exists(sys.argv[2]): time.sleep(0.1)\n"
    "sys.exit(7)' {starts} {release}"
)

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def host(mortal_sshd, log_dir, settings):  # noqa: F811
    require(subprocess.run(["which", "screen"], capture_output=True).returncode == 0, "no screen")
    settings.SSH_CONNECT_TIMEOUT = 3
    return make_host(mortal_sshd, "node-w", "127.0.0.2")


def due_task(owner, host, tmp_path) -> Task:
    tmp_path.mkdir(exist_ok=True)
    spec = TaskSpec(
        host=host,
        template=NOTES_ITS_STARTS,
        parameters={"starts": tmp_path / "starts", "release": tmp_path / "release"},
        scheduled_start=timezone.now() - timedelta(seconds=1),
    )
    return services.create_job(owner, name="killed", specs=[spec]).tasks.get()


def manage(settings, *args, wait=True):
    """`manage.py ARGS` in a new process on the test database (a worker, or a restarted one)."""
    env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "HIVE_DATA_DIR": str(settings.HIVE_DATA_DIR),
        "JOBS_LOG_DIR": settings.JOBS_LOG_DIR,
        "JOBS_SESSION_PREFIX": settings.JOBS_SESSION_PREFIX,
        "JOBS_START_TIMEOUT": str(START_TIMEOUT),
    }
    argv = [sys.executable, "manage.py", *args]
    if not wait:
        return subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
    out = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


def kill(worker: subprocess.Popen) -> None:
    worker.send_signal(signal.SIGKILL)
    worker.wait(timeout=10)
    worker.stdout.close()


def status(task: Task) -> str:
    return Task.objects.values_list("status", flat=True).get(pk=task.pk)


def sessions_of(task: Task) -> list[str]:
    return [s for s in task_sessions() if s.endswith(f".{task.session_name}")]


def next_round(settings, task: Task) -> str:
    """What the next worker round does, once the killed start is older than the timeout and
    the killed worker's sync lease has run out (it can no longer renew it)."""
    task.refresh_from_db()
    if task.status == Task.Status.STARTING:
        wait_for(lambda: task.started_at < timezone.now() - timedelta(seconds=START_TIMEOUT))
    Activity.objects.filter(name=tasks.SYNC_ACTIVITY).update(lease_expires=timezone.now())
    return manage(settings, "syncjobs")


def assert_started_once(settings, task: Task, tmp_path) -> None:
    """Running and recorded as such, in exactly one screen session, its program started once;
    it then ends and the next round records its exit code."""
    task.refresh_from_db()
    assert task.status == Task.Status.RUNNING, (task.status, task.error)
    assert len(sessions_of(task)) == 1, task_sessions()
    pid_file = Path(task.log_path).with_suffix(".pid")
    assert task.pid == int(pid_file.read_text()) and os.kill(task.pid, 0) is None
    assert wait_for(lambda: (tmp_path / "starts").exists(), timeout=20)
    assert wait_for(lambda: "running" in Path(task.log_path).read_text(), timeout=20)
    (tmp_path / "release").touch()
    assert wait_for(lambda: Path(task.log_path).with_suffix(".exit").exists(), timeout=30)
    assert "1 ended" in manage(settings, "syncjobs")
    task.refresh_from_db()
    assert (task.status, task.exit_code) == (Task.Status.EXITED, 7)
    assert (tmp_path / "starts").read_text() == "started\n"  # never a second start
    assert Path(task.log_path).read_text().count("running") == 1


@pytest.mark.usefixtures("runner")  # the owner runs tasks as this UNIX account
def test_killed_before_its_screen_session_starts_the_task_is_started_again(
    owner,
    host,
    mortal_sshd,
    settings,
    tmp_path,
):
    task = due_task(owner, host, tmp_path)
    os.kill(mortal_sshd.proc.pid, signal.SIGSTOP)  # the start waits for the sshd's greeting
    try:
        worker = manage(settings, "syncjobs", wait=False)
        assert wait_for(lambda: status(task) == Task.Status.STARTING, timeout=60)
        time.sleep(0.5)
        kill(worker)
    finally:
        os.kill(mortal_sshd.proc.pid, signal.SIGCONT)
    assert not sessions_of(task)
    out = next_round(settings, task)
    assert f"task {task.pk} retried" in out and "1 scheduled actions done" in out, out
    assert_started_once(settings, task, tmp_path)


@contextlib.contextmanager
def row_held(task: Task):
    """Another database client holds the task's row (a write lock on SQLite): the worker's
    update to "running" waits. Yields a function reading the row's status through it."""
    db, table = connection.settings_dict, Task._meta.db_table
    if connection.vendor == "sqlite":
        conn = sqlite3.connect(db["NAME"], timeout=20, isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")
        query = f"SELECT status FROM {table} WHERE id = ?"  # noqa: S608 (the model's table)
    else:
        conn = psycopg.connect(
            host=db["HOST"] or "127.0.0.1",
            port=db["PORT"] or 5432,
            user=db["USER"],
            password=db["PASSWORD"] or None,
            dbname=db["NAME"],
        )
        query = f"SELECT status FROM {table} WHERE id = %s FOR UPDATE"  # noqa: S608
    conn.execute(query, (task.pk,))
    try:
        yield lambda: conn.execute(query, (task.pk,)).fetchone()[0]
    finally:
        if connection.vendor == "postgresql":
            # The killed worker's UPDATE already reached the server, which would still run
            # it: end that backend too, as if the worker had died before sending it.
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE %s = ANY(pg_blocking_pids(pid))",
                (conn.info.backend_pid,),
            )
        conn.rollback()
        conn.close()


@pytest.mark.usefixtures("runner")  # the owner runs tasks as this UNIX account
def test_killed_after_its_screen_session_started_the_session_is_adopted(
    owner,
    host,
    settings,
    tmp_path,
):
    # The moment between the screen session starting and the row saying so is short: the
    # row is taken just after the start was claimed (its audit record written), before the
    # SSH call returns. Should the worker win that race, the round is tried again.
    for attempt in range(3):
        task = due_task(owner, host, tmp_path / str(attempt))
        audited = AuditEvent.objects.filter(action="job.run_as").count()
        worker = manage(settings, "syncjobs", wait=False)
        assert wait_for(
            lambda n=audited: AuditEvent.objects.filter(action="job.run_as").count() > n,
            timeout=60,
            step=0.01,
        )
        with row_held(task) as row_status:
            assert wait_for(lambda t=task: sessions_of(t), timeout=30)
            hit = row_status() == Task.Status.STARTING
            kill(worker)
        if hit:
            break
    assert hit, "the worker recorded the start before the row could be held, three times"
    assert status(task) == Task.Status.STARTING
    out = next_round(settings, task)
    assert f"task {task.pk} adopted" in out and "0 scheduled actions done" in out, out
    assert_started_once(settings, task, tmp_path / str(attempt))


@pytest.mark.usefixtures("runner")  # the owner runs tasks as this UNIX account
def test_killed_after_recording_the_start_nothing_is_redone(
    owner,
    host,
    settings,
    tmp_path,
):
    task = due_task(owner, host, tmp_path)
    worker = manage(settings, "syncjobs", wait=False)
    assert wait_for(lambda: status(task) == Task.Status.RUNNING, timeout=60, step=0.01)
    kill(worker)
    out = next_round(settings, task)
    assert "interrupted" not in out and "1 active tasks checked, 0 ended" in out, out
    assert_started_once(settings, task, tmp_path)
