"""gpurun and hypersearch: commands from a stream run on free GPUs of a host behind the real
sshd, in real screen sessions, recorded as one job; GPUs reserved or busy are skipped."""

import getpass
import io
import itertools
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from django.contrib.auth.models import Group
from django.core.management import CommandError, call_command
from django.db import connection

from accesscontrol.services import DEFAULT_GROUP_NAME, ensure_default_group, profile_for
from jobs import remote
from jobs.models import Job, Task
from monitoring import localaccounts
from monitoring.inventory import probe_and_record
from monitoring.models import Host
from queueing import gpurun as runner_module
from tests.jobs.test_first_run import OWNER, owner_logs, unix_owner  # noqa: F401 (fixtures)
from tests.realparts import FAKE_BIN, FakeGpus

from .conftest import reserve, soon, wait_for

pytestmark = pytest.mark.django_db(transaction=True)
ROOT = Path(__file__).resolve().parents[2]


def gpurun(stdin, gpus="0,1", host="node-2", user="owner") -> tuple[str, int]:
    out = io.StringIO()
    try:
        call_command("gpurun", gpus=gpus, host=host, user=user, stdin=stdin, stdout=out)
        code = 0
    except CommandError as exc:
        code = exc.returncode
        out.write(f"error: {exc}\n")
    return out.getvalue(), code


def lines_with(output: str, word: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith(word)]


def test_each_line_runs_on_a_free_gpu_and_is_recorded_as_one_job(runner, real_nodes):
    commands = "".join(f"echo run {i} $CUDA_VISIBLE_DEVICES\n" for i in range(5)) + "exit 3\n"
    output, code = gpurun(io.StringIO(commands))
    assert len(lines_with(output, "started")) == 6 and len(lines_with(output, "finished")) == 6
    assert "exit 3: exit 3" in output and output.count(" exit 0: ") == 5
    assert code == 1 and "gpurun: 6 commands run, 1 failed" in output
    job = Job.objects.get()
    assert job.owner == runner and job.tasks.count() == 6
    gpus = {t.devices.get().uuid for t in job.tasks.all()}
    assert gpus == {"GPU-node-2-0", "GPU-node-2-1"}
    for task in job.tasks.filter(command__startswith="echo"):
        assert task.status == Task.Status.EXITED
        log = open(task.log_path).read()
        assert log.strip().endswith(task.devices.get().uuid)  # CUDA_VISIBLE_DEVICES is its GPU


def feeding(write_end: int):
    """A writer for the pipe gpurun reads, line by line, as a FIFO or `tail -f` would."""
    stream = os.fdopen(write_end, "w", buffering=1)
    return stream


def test_each_gpu_worker_keeps_a_small_page_cache(runner, real_nodes, monkeypatch):
    """A long `tail -f | gpurun` does not grow with every start: the page cache of each
    worker's SQLite connection is bounded, not SQLite's 2 MB."""
    if connection.vendor != "sqlite":
        pytest.skip("SQLite's page cache")
    sizes = []
    bound = runner_module.keep_page_cache_small

    def bound_and_read():
        bound()
        with connection.cursor() as cursor:
            sizes.append(cursor.execute("PRAGMA cache_size").fetchone()[0])

    monkeypatch.setattr(runner_module, "keep_page_cache_small", bound_and_read)
    output, code = gpurun(io.StringIO("true\ntrue\n"))
    assert code == 0, output
    assert sizes == [-runner_module.WORKER_PAGE_CACHE_KIB] * 2  # one per GPU's worker


def test_an_end_recorded_after_the_next_start_keeps_the_time_it_came(runner, real_nodes):
    """Each task's end is recorded once the next command on its GPU has started (not on the
    way from one to the next), with the moment the host's wait saw it: each task ended
    before the next one on the GPU was claimed; the last is recorded before gpurun returns,
    and the failures are counted from what was recorded."""
    # Each sleep ends while the host waits for it (not before its first wait).
    output, code = gpurun(io.StringIO("sleep 0.3\nexit 3\nsleep 0.3\ntrue\n"), gpus="0")
    assert code == 1 and "gpurun: 4 commands run, 1 failed" in output, output
    tasks = list(Task.objects.order_by("pk"))
    assert [(t.status, t.exit_code) for t in tasks] == [
        (Task.Status.EXITED, c) for c in (0, 3, 0, 0)
    ]
    for earlier, later in itertools.pairwise(tasks):
        assert earlier.ended_at <= later.started_at
    finished = lines_with(output, "finished")
    assert [line.split(":")[0] for line in finished] == [
        f"finished #{t.pk} gpu 0 exit {t.exit_code}" for t in tasks
    ]


def test_a_window_killed_without_its_exit_file_is_found_by_a_sync(runner, real_nodes):
    """The window's shell killed (no exit file will come): the host's wait runs out, the sync
    finds the session gone, and gpurun says the task failed and goes on."""
    output, code = gpurun(io.StringIO("kill -9 $PPID\ntrue\n"), gpus="0")
    killed, after = Task.objects.order_by("pk")
    assert code == 1 and "gpurun: 2 commands run, 1 failed" in output, output
    assert f"finished #{killed.pk} gpu 0 failed: kill -9 $PPID" in output
    assert killed.status == Task.Status.FAILED and "without an exit code" in killed.error
    assert (after.status, after.exit_code) == (Task.Status.EXITED, 0)


def test_ctrl_c_records_an_end_not_yet_recorded(runner, real_nodes, monkeypatch):
    """Ctrl-C (which makes gpurun stop all and return) while the next command is being
    started, after the last one's end was said but before it was recorded: the end is
    recorded before gpurun returns, not left "running" until the service's sync finds it."""
    starting, go_on = threading.Event(), threading.Event()
    launch = runner_module.job_services.launch_claimed

    def held_launch(task, claimed_as=None):
        if task.command == "sleep 1":
            starting.set()
            go_on.wait(30)
        return launch(task, claimed_as=claimed_as)

    monkeypatch.setattr(runner_module.job_services, "launch_claimed", held_launch)
    node2, _ = real_nodes
    out = io.StringIO()
    gpu = runner_module.Runner(node2, runner, [node2.devices.get(index=0)], out)
    # (Ctrl-C reaches only a main thread, which runs the test: gpurun runs beside it.)
    thread = threading.Thread(target=gpu.run, args=(io.StringIO("sleep 0.3\nsleep 1\n"),))
    thread.start()
    try:
        assert starting.wait(60)
        gpu.stop_all()  # what gpurun does on Ctrl-C, before it returns 130
        first = Task.objects.get(command="sleep 0.3")
        assert (first.status, first.exit_code) == (Task.Status.EXITED, 0), out.getvalue()
    finally:
        go_on.set()  # the held start goes on, and its worker sees the stop and ends
        thread.join(60)


def test_a_gpu_reserved_mid_run_is_skipped_from_then_on(runner, other_runner, real_nodes):
    node2, _ = real_nodes
    read_end, write_end = os.pipe()
    feed = feeding(write_end)
    result = {}
    reader = os.fdopen(read_end)
    thread = threading.Thread(target=lambda: result.update(out=gpurun(reader)))
    thread.start()
    feed.write("sleep 1\nsleep 1\n")
    assert wait_for(lambda: Task.objects.filter(status=Task.Status.RUNNING).count() == 2)
    reserve(other_runner, [node2.devices.get(index=1)], soon(-1), soon(60))
    for i in range(3):
        feed.write(f"echo after {i}\n")
    feed.close()
    thread.join(120)
    output, code = result["out"]
    assert code == 0, output
    assert "gpu 1 skipped: GPU 1 on node-2 reserved by other until" in output
    after = Task.objects.filter(command__startswith="echo after")
    assert after.count() == 3
    assert {t.devices.get().index for t in after} == {0}


def test_a_gpu_with_a_foreign_process_is_skipped(runner, real_nodes, gpus, real_processes):
    squatter = real_processes(["sleep", "60"])
    gpus("127.0.0.2").set_processes([f"GPU-node-2-0, {squatter.pid}, 500, sleep"])
    output, code = gpurun(io.StringIO("true\ntrue\n"))
    assert code == 0
    assert f"gpu 0 skipped: GPU 0 on node-2 runs process {squatter.pid} (sleep)" in output
    assert {t.devices.get().index for t in Task.objects.all()} == {1}


def test_lines_arriving_slowly_start_as_they_come(runner, real_nodes):
    read_end, write_end = os.pipe()
    feed = feeding(write_end)
    result = {}
    reader = os.fdopen(read_end)
    thread = threading.Thread(target=lambda: result.update(out=gpurun(reader, gpus="0")))
    thread.start()
    feed.write("echo first\n")
    assert wait_for(lambda: Task.objects.filter(status=Task.Status.EXITED).count() == 1, 60)
    time.sleep(0.5)
    assert thread.is_alive()  # still reading: the stream has not ended
    feed.write("echo second\n")
    feed.close()
    thread.join(60)
    assert result["out"][1] == 0 and Task.objects.count() == 2


def test_a_screen_session_is_never_started_twice_under_one_name(runner, real_nodes, settings):
    """Each start looks for an earlier window of its name (as a retried start would meet):
    refused while that one runs, started once it has ended."""
    node2, _ = real_nodes
    name, user = f"{settings.JOBS_SESSION_PREFIX}-twice", getpass.getuser()
    argv = remote.spawn_argv(name, "sleep 60", {})
    first = remote.spawn(node2, user, argv, min_uid=0)
    with pytest.raises(remote.RemoteError, match=f"a screen session named {name} is already"):
        remote.spawn(node2, user, argv, min_uid=0)
    remote.send_signal(node2, user, "KILL", [first.pid])
    assert wait_for(lambda: not remote.session_states(node2, user, [name])[name].alive)
    again = remote.spawn(node2, user, argv, min_uid=0)
    assert again.pid and again.pid != first.pid
    assert remote.session_states(node2, user, [name])[name].alive
    remote.send_signal(node2, user, "KILL", [again.pid])


def test_bad_arguments_are_refused_clearly(runner, real_nodes):
    for kwargs, message in [
        ({"gpus": "0,7"}, "node-2 has no GPU 7 (GPUs: 0, 1)"),
        ({"gpus": "a"}, "--gpus takes GPU indices"),
        ({"host": "nowhere"}, "no host named 'nowhere'"),
        ({"user": "nobody"}, "no user named 'nobody'"),
    ]:
        with pytest.raises(CommandError, match=re.escape(message)):
            call_command(
                "gpurun",
                **{"gpus": "0", "host": "node-2", "user": "owner", **kwargs},
                stdin=io.StringIO("true\n"),
                stdout=io.StringIO(),
            )
    assert not Task.objects.exists()


def test_hypersearch_prints_quoted_commands_for_gpurun(db):
    grid = _hypersearch(
        "python train.py --lr {lr} --name {name}",
        "-p",
        "lr",
        "0.1",
        "0.01",
        "-p",
        "name",
        "a b",
        "$(id)",
    )
    assert grid.splitlines() == [
        "python train.py --lr 0.1 --name 'a b'",
        "python train.py --lr 0.1 --name '$(id)'",
        "python train.py --lr 0.01 --name 'a b'",
        "python train.py --lr 0.01 --name '$(id)'",
    ]
    # The same seed draws the same sample, so a search can be repeated.
    sampled = "x {a} {b}", "-p", "a", "1", "2", "3", "-p", "b", "4", "5", "--samples", "2"
    sample = _hypersearch(*sampled, "--seed", "7")
    again = _hypersearch(*sampled, "--seed", "7")
    assert len(sample.splitlines()) == 2 and sample == again
    with pytest.raises(CommandError, match=re.escape("No value for {b}")):
        _hypersearch("x {a} {b}", "-p", "a", "1")
    with pytest.raises(CommandError, match="holds a line break; gpurun reads one command per"):
        _hypersearch("x {a}", "-p", "a", "1", "two\nlines")
    with pytest.raises(CommandError, match="holds a line break"):
        _hypersearch("x {a}\nrm -rf ~", "-p", "a", "1")


def test_hypersearch_piped_into_gpurun_in_a_shell(runner, real_nodes, settings):
    """The two commands as a user types them: `hypersearch ... | gpurun ...`."""
    env = {**os.environ, "HIVE_DATA_DIR": str(settings.HIVE_DATA_DIR)}
    search = subprocess.run(
        [sys.executable, "manage.py", "hypersearch", "echo {x}", "-p", "x", "1", "2"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        cwd=ROOT,
    )
    output, code = gpurun(io.StringIO(search.stdout))
    assert code == 0 and len(lines_with(output, "finished")) == 2


def _hypersearch(*args) -> str:
    out = io.StringIO()
    call_command("hypersearch", *args, stdout=out)
    return out.getvalue()


# --- on the service's own machine: one shell per GPU runs the starts and waits --------------


@pytest.fixture
def this_machine(owner, unix_owner, owner_logs, fake_gpu_root, monkeypatch):  # noqa: F811
    """Host `localhost` (no SSH) with two fake GPUs; the owner's tasks run as their own
    UNIX account there (the service runs as root and switches to it)."""
    monkeypatch.setenv("PATH", f"{FAKE_BIN}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_GPU_DIR", str(fake_gpu_root))
    FakeGpus(fake_gpu_root, "local").set_gpus(
        [f"{i}, GPU-local-{i}, 15360, 0, 0, 0, 30, 20.0, Tesla T4" for i in range(2)]
    )
    host = Host.objects.create(name="localhost", address="localhost", transport="local")
    probe_and_record(host)
    profile = profile_for(owner)
    profile.unix_username = OWNER
    profile.save()
    ensure_default_group()
    remote.close_all()
    return host


def counting_accounts(monkeypatch) -> list[list[str]]:
    """Every argv switched to an account on this machine (setpriv), as it is switched."""
    switched, switch = [], localaccounts.as_account
    monkeypatch.setattr(
        localaccounts, "as_account", lambda name, argv: switched.append(argv) or switch(name, argv)
    )
    return switched


def test_on_this_machine_a_gpu_runs_its_commands_through_one_shell_as_the_owner(
    owner,
    this_machine,
    unix_owner,  # noqa: F811
    monkeypatch,
):
    switched = counting_accounts(monkeypatch)
    monkeypatch.setenv("HIVE_SERVICE_SECRET", "not for tasks")  # the service's environment
    commands = "".join(f"id -un; pwd; env; echo {i} $CUDA_VISIBLE_DEVICES\n" for i in range(5))
    output, code = gpurun(io.StringIO(commands + "exit 3\n"), host="localhost")
    assert code == 1 and "gpurun: 6 commands run, 1 failed" in output
    assert "exit 3: exit 3" in output and output.count(" exit 0: ") == 5
    # One shell per GPU: the starts and the waits went through it, none switched on its own.
    assert len(switched) == 2 and all(remote.LAUNCHER in argv for argv in switched)
    for task in Task.objects.filter(command__startswith="id"):
        log = open(task.log_path).read()
        said = log.split()
        assert said[:2] == [OWNER, unix_owner.pw_dir] and said[-1] == task.devices.get().uuid
        assert f"USER={OWNER}" in log and "HIVE_SERVICE_SECRET" not in log  # reset, as over SSH
        assert os.stat(task.log_path).st_uid == unix_owner.pw_uid
        assert task.unix_username == OWNER and task.pid and task.status == Task.Status.EXITED


def test_the_uid_floor_is_checked_on_each_start_through_the_shell(
    owner,
    this_machine,
    unix_owner,  # noqa: F811
    settings,
):
    settings.RUN_AS_MIN_UID = unix_owner.pw_uid + 1
    output, code = gpurun(io.StringIO("true\n"), gpus="0", host="localhost")
    below = f"refused: {OWNER} has UID {unix_owner.pw_uid}, below {unix_owner.pw_uid + 1}"
    assert code == 1 and below in output
    assert Task.objects.get().status == Task.Status.FAILED


def test_the_shell_passes_each_item_as_is_and_is_replaced_when_it_ends(this_machine):
    items = ["a b", "$(id)", "*", "", "tab\there", "x\ny"]  # a line break goes the usual way
    # So does what the shell would take for one of the scripts it was given (their name).
    named = remote.SCRIPT_MARK + "0"
    with remote.launchers(this_machine):
        said = remote.run_as(this_machine, OWNER, ["printf", "%s|", *items])
        assert said.stdout == "|".join(items) + "|"
        assert remote.run_as(this_machine, OWNER, ["printf", "%s", named]).stdout == named
        shell = remote.run_as(this_machine, OWNER, ["sh", "-c", "echo $PPID"]).stdout
        os.kill(int(shell), 9)
        assert wait_for(lambda: ended(int(shell)), 10)
        again = remote.run_as(this_machine, OWNER, ["sh", "-c", "echo $PPID"]).stdout
        assert again != shell
        with pytest.raises(remote.RemoteError, match="sleep did not finish within 0.5s"):
            remote.run_as(this_machine, OWNER, ["sleep", "5"], timeout=0.5)
        assert remote.run_as(this_machine, OWNER, ["true"]).ok
        with pytest.raises(remote.RemoteError, match="command not found: no-such-command"):
            remote.run_as(this_machine, OWNER, ["no-such-command"])


def ended(pid: int) -> bool:
    """The process is gone, or a zombie not reaped yet."""
    try:
        return open(f"/proc/{pid}/stat").read().rpartition(")")[2].split()[0] == "Z"
    except FileNotFoundError:
        return True


def test_a_user_who_may_never_use_the_gpus_gets_an_error_not_a_wait(
    runner, other_runner, real_nodes
):
    """No grant covers the GPUs now or later: each is given up (said once) and gpurun ends
    with an error while its stream is still open (as `tail -f` keeps it), starting nothing."""
    Group.objects.get(name=DEFAULT_GROUP_NAME).user_set.remove(other_runner)
    read_end, write_end = os.pipe()
    feed = feeding(write_end)
    feed.write("true\n")
    result = {}
    reader = os.fdopen(read_end)
    thread = threading.Thread(target=lambda: result.update(out=gpurun(reader, user="other")))
    thread.start()
    try:
        thread.join(60)
        assert not thread.is_alive()
        output, code = result["out"]
        assert code == 1, output
        assert "other is not allowed on node-2:0: no grant covers it now or later" in output
        assert "gpu 0 given up: other can never use it" in output
        assert "gpu 1 given up: other can never use it" in output
        assert "error: other can never use GPUs 0,1 on node-2: ask an admin" in output
        assert not Job.objects.exists()
    finally:
        feed.close()
        thread.join(60)
