"""hive submit / jobs / logs / stop against a live server, running tasks for real: through the
test sshd, in GNU screen, as this UNIX user (the fixtures of tests/jobs)."""

import json
import re
import shlex
import shutil
import subprocess
import sys
import uuid

import pytest

from accesscontrol.services import profile_for
from jobs import remote, services
from jobs.models import Job, Task
from queueing.models import QueuedJob
from tests.jobs.conftest import wait_for

# Prints its arguments as Python sees them, a line at a time, then exits with 3.
TALKER = (
    "import os, sys, time\n"
    "print('gpus', os.environ['CUDA_VISIBLE_DEVICES'], 'seed', os.environ.get('SEED'))\n"
    "print('args', sys.argv[1:])\n"
    "for i in range(5):\n"
    "    print('line', i, flush=True); time.sleep(0.3)\n"
    "sys.exit(3)"
)
# Odd arguments that must reach the program as they are: spaces, quotes, braces, $(...).
ODD_ARGS = ["a b", "it's", '"x"', "{lr}", "$(id)", "; echo no"]


@pytest.fixture(autouse=True)
def _own_screen_sessions(settings):
    """Screen sessions named for this test alone, quit afterwards: unlike tests/jobs's
    `hivetest…` sessions, no other test process (which quits all of those) touches them."""
    settings.JOBS_SESSION_PREFIX = prefix = f"hivecli{uuid.uuid4().hex[:8]}"
    remote.close_all()
    yield
    remote.close_all()
    if shutil.which("screen") is None:
        return
    listing = subprocess.run(["screen", "-ls"], capture_output=True, text=True).stdout
    for session in re.findall(rf"^\s+(\d+\.{prefix}-\d+)\s", listing, re.MULTILINE):
        subprocess.run(["pkill", "-KILL", "-s", session.split(".")[0]], check=False)
        subprocess.run(["screen", "-S", session, "-X", "quit"], capture_output=True, check=False)
    subprocess.run(["screen", "-wipe"], capture_output=True, check=False)


def submitted_task(output: str) -> Task:
    match = re.search(r"Started job (\d+) .* task (\d+) is", output)
    assert match, output
    task = Task.objects.get(pk=int(match[2]))
    assert task.job_id == int(match[1])
    return task


def ended_with(task: Task) -> int | None:
    """The exit code of an ended task (as the workers' sync found it), else None."""
    task = Task.objects.get(pk=task.pk)
    return task.exit_code if task.status in Task.ENDED else None


def group_members(pid: int) -> list[int]:
    """The processes of the task's process group but its wrapper shell (the leader)."""
    out = subprocess.run(["pgrep", "-g", str(pid)], capture_output=True, text=True).stdout
    return [int(p) for p in out.split() if int(p) != pid]


# --- submit, logs, jobs ----------------------------------------------------------------------


def test_submit_runs_now_logs_follow_to_the_end_and_jobs_shows_the_exit_code(
    hive, signed_in, runner, gpu_node, workers
):
    signed_in(runner)
    argv = [sys.executable, "-u", "-c", TALKER, *ODD_ARGS]
    result = hive("submit", "--gpus", "1", "-e", "SEED=7", "--name", "talk", "--", *argv)
    assert result.exit_code == 0, result.output
    task = submitted_task(result.output)
    assert "on node-2 (node-2:0)" in result.output
    assert task.command == shlex.join(argv)  # what runs is exactly the argv given
    assert task.status == Task.Status.RUNNING and task.job.name == "talk"

    result = hive("logs", "-f", str(task.pk))
    assert result.exit_code == 3, result.output  # the task's own exit code
    assert "gpus GPU-0-uuid seed 7" in result.stdout
    assert f"args {ODD_ARGS!r}" in result.stdout  # every argument arrived literally
    assert [f"line {i}" in result.stdout for i in range(5)] == [True] * 5
    assert f"Task {task.pk} exited 3." in result.stderr

    table = hive("jobs")
    assert table.exit_code == 0, table.output
    row = next(line for line in table.output.splitlines() if line.startswith(f"{task.job_id} "))
    assert "talk" in row and "node-2:0" in row and "exited 3" in row
    listed = json.loads(hive("jobs", "--json").output)
    assert [(t["id"], t["exit_code"]) for t in listed["jobs"][0]["tasks"]] == [(task.pk, 3)]
    again = hive("logs", str(task.pk))  # without -f: the log as it is, at once
    assert again.exit_code == 0 and "line 4" in again.output


def test_submit_picks_free_gpus_and_says_when_there_are_not_enough(
    hive, signed_in, runner, gpu_node
):
    signed_in(runner)
    result = hive("submit", "--gpus", "3", "--", "true")
    assert result.exit_code == 1
    assert (
        "3 GPUs not usable now on any host: There are not 3 GPUs on one host that fit the "
        "request. Queueing cannot help: ask for fewer GPUs." in result.output
    )
    result = hive("submit", "--host", "node-9", "--", "true")
    assert result.exit_code == 1 and "No host named 'node-9'; hosts: node-2." in result.output
    result = hive("submit", "--gpus", "0", "--", "true")
    assert result.exit_code == 1 and "Say where to run it: --host H" in result.output
    result = hive("submit", "-e", "no-equals", "--host", "node-2", "--", "true")
    assert result.exit_code == 1 and "write environment variables as NAME=value" in result.output
    assert hive("submit").exit_code == 2  # no command: click's usage error
    assert not Job.objects.exists()


def test_stop_really_stops_a_running_sleep_and_kill_one_that_ignores_sigterm(
    hive, signed_in, runner, gpu_node, workers
):
    signed_in(runner)
    sleeper = submitted_task(
        hive("submit", "-g", "0", "--host", "node-2", "--", "sleep", "300").output
    )
    stubborn = submitted_task(
        hive(
            "submit", "-g", "0", "--host", "node-2", "--", "sh", "-c", "trap '' TERM; sleep 300"
        ).output
    )
    assert wait_for(lambda: group_members(sleeper.pid)) and wait_for(
        lambda: group_members(stubborn.pid)
    )

    result = hive("stop", str(sleeper.job_id))
    assert result.exit_code == 0, result.output
    assert f"Task {sleeper.pk}: stopping (SIGTERM sent)" in result.output
    assert wait_for(lambda: not group_members(sleeper.pid))  # the sleep is gone
    assert wait_for(lambda: ended_with(sleeper) == 128 + 15)  # SIGTERM ended it

    result = hive("stop", "--kill", str(stubborn.job_id))
    assert result.exit_code == 0 and f"Task {stubborn.pk}: killed" in result.output
    assert wait_for(lambda: not group_members(stubborn.pid))
    assert wait_for(lambda: ended_with(stubborn) == 128 + 9)  # SIGKILL ended it
    result = hive("stop", str(stubborn.job_id))
    assert result.exit_code == 0
    assert f"Job {stubborn.job_id} has no running tasks (it is " in result.output
    rows = {line.split()[0]: line for line in hive("jobs").output.splitlines()[1:]}
    assert "143" in rows[str(sleeper.job_id)] and "137" in rows[str(stubborn.job_id)]


# --- queue -----------------------------------------------------------------------------------


def test_submit_queue_waits_in_the_queue(hive, signed_in, owner, bookable):
    signed_in(owner)
    result = hive(
        "submit", "--queue", "--gpus", "2", "--host", "node-1", "--", "python", "t.py", "{x}"
    )
    assert result.exit_code == 0, result.output
    queued = QueuedJob.objects.get()
    said = f"Queued 'python t.py {{x}}' as queue entry {queued.pk} (2 GPUs on host node-1)"
    assert said in result.output
    assert queued.state == QueuedJob.State.WAITING and queued.owner == owner
    task = queued.tasks.get()
    assert (task.kind, task.gpu_count, task.host.name) == ("one_host", 2, "node-1")
    assert services.templating.render(task.template, {}) == "python t.py '{x}'"
    assert not Job.objects.exists()  # nothing runs until the scheduler places it

    hive("submit", "--queue", "--", "python", "u.py")  # 1 GPU on any host
    assert QueuedJob.objects.get(name="python u.py").tasks.get().host is None
    table = hive("jobs").output
    assert "QUEUED" in table and "python t.py {x}" in table and "python u.py" in table
    listed = json.loads(hive("jobs", "--json").output)
    assert sorted(q["name"] for q in listed["queued"]) == ["python t.py {x}", "python u.py"]


def test_dequeue_takes_own_entries_out_and_not_someone_elses(
    hive, signed_in, owner, other_user, bookable
):
    from hive_cli import config

    signed_in(owner)
    hive("submit", "--queue", "--gpus", "2", "--", "python", "t.py")
    mine = QueuedJob.objects.get()
    owners_config = config.load()
    signed_in(other_user)
    refused = hive("dequeue", str(mine.pk))
    assert refused.exit_code == 1 and "Not found" in refused.output
    mine.refresh_from_db()
    assert mine.state == QueuedJob.State.WAITING
    config.save(owners_config)
    result = hive("dequeue", str(mine.pk))
    assert result.exit_code == 0, result.output
    assert f"Took 'python t.py' (queue entry {mine.pk}) out of the queue." in result.output
    mine.refresh_from_db()
    assert mine.state == QueuedJob.State.CANCELLED
    assert "QUEUED" not in hive("jobs").output


def test_the_queue_refuses_with_its_reason(hive, signed_in, owner, bookable):
    signed_in(owner)
    result = hive("submit", "--queue", "--gpus", "0", "--", "true")
    assert result.exit_code == 1 and "Refused: A task asks for 1 to 64 GPUs." in result.output
    assert not QueuedJob.objects.exists()


# --- refusals and permissions ------------------------------------------------------------------


def test_a_refused_start_says_why_and_leaves_no_job(hive, signed_in, owner, lab):
    signed_in(owner)  # no grant: access control refuses before anything runs
    result = hive("submit", "--host", "node-1", "--", "true")
    assert result.exit_code == 1
    assert "1 GPU not usable now on node-1:" in result.output
    assert "owner is not allowed on node-1:1: no grant covers it now or later" in result.output
    assert "Queueing cannot help: only an admin can change that." in result.output
    assert "--queue" not in result.output
    assert not Job.objects.exists()


def test_a_start_that_fails_on_the_host_says_why_and_keeps_the_failed_job(
    hive, signed_in, runner, gpu_node, workers
):
    profile = profile_for(runner)
    profile.unix_username = "no-such-account"  # the host refuses the login
    profile.save()
    signed_in(runner)
    result = hive("submit", "--host", "node-2", "--", "true")
    assert result.exit_code == 1
    job = Job.objects.get()
    assert f"Job {job.pk} did not start: Task {job.tasks.get().pk} could not start" in result.output
    assert job.tasks.get().status == Task.Status.FAILED  # kept, with why, for the owner to see
    assert "failed" in hive("jobs").output


@pytest.fixture
def others_job(bookable, other_user):
    spec = services.TaskSpec(host=bookable[0].host, template="sleep 1")
    return services.create_job(other_user, name="theirs", specs=[spec])


def test_another_users_job_is_not_found(hive, signed_in, owner, others_job):
    signed_in(owner)
    task = others_job.tasks.get()
    for args, what in [
        (("stop", str(others_job.pk)), f"No job {others_job.pk}, or it is not yours."),
        (("stop", "--kill", str(others_job.pk)), f"No job {others_job.pk}, or it is not yours."),
        (("logs", str(task.pk)), f"No task {task.pk}, or it is not yours."),
        (("logs", "-f", str(task.pk)), f"No task {task.pk}, or it is not yours."),
    ]:
        result = hive(*args)
        assert result.exit_code == 1 and what in result.output, args
    assert "theirs" not in hive("jobs", "--all").output


def test_an_admin_sees_every_job_with_all(hive, signed_in, admin_user, others_job):
    signed_in(admin_user)
    assert "No jobs." in hive("jobs").output  # by default: one's own
    row = next(line for line in hive("jobs", "--all").output.splitlines() if "theirs" in line)
    assert "other" in row and "pending" in row
    result = hive("stop", str(others_job.pk))
    assert result.exit_code == 0
    assert f"Job {others_job.pk} has no running tasks (it is pending)." in result.output
    result = hive("logs", str(others_job.tasks.get().pk))
    assert result.exit_code == 1 and "is pending: it has no log yet." in result.output


def test_job_commands_need_a_sign_in(hive, db):
    for args in (("jobs",), ("logs", "1"), ("stop", "1"), ("submit", "--", "true")):
        result = hive(*args)
        assert result.exit_code == 1 and "Not signed in" in result.output, args
