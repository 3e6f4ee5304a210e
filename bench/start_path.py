"""Measure: which of our files a task start calls through, and how often it climbs a layer.

Four ways start a task: the page's "start" (POST /jobs/<id>/action), the API's
(POST /api/tasks/<id>/act/), the queue (a scheduling round's planning and gang start) and
gpurun (one command on one GPU). Each is run for real against a test sshd (GNU screen on
this machine), while ``sys.setprofile`` watches every Python call in this thread. From
the entry function (the view, the API action, the worker's ``carry_out``, the scheduler's
``plan_round`` and ``start_job``, gpurun's ``Runner.start``) down to the SSH launch
(``jobs.remote.spawn``, not followed further), it lists each file of ours that runs, in
the order first reached, and each call from one of our files into another (the nearest of
our frames on the stack is the caller, so a call made through Django, e.g. a queryset
evaluating a model's method, counts as the caller's). A call is a *climb* when the file
called lies in a higher layer than its caller (the layers contract in pyproject.toml;
docs/development.md, "Layers").

Per way it prints: the files of ours that run (*: in the start's own layers: jobs, queueing,
allocation, board), how many of them call on into another file of ours, the deepest chain
(the most files of ours on the stack at once, from the entry down), the calls *back* into a
file already above on that chain, the climbs, and the calls up into a file the caller does
not import (a rule registered with ``restrict``, a holder source registered with
allocation, a model's ``__str__`` called by the audit). A lambda, a generator expression or
a comprehension counts as the function that wrote it: ``merge(x for x in ...)`` hands
``merge`` a lazy value of the caller's, not a call back up.

Run: .venv/bin/python bench/start_path.py        (a table, then each way's files in order)
"""

import ast
import getpass
import io
import os
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ["HIVE_DATA_DIR"] = tempfile.mkdtemp(prefix="hive-bench-")
os.environ["JOBS_LOG_DIR"] = str(Path(os.environ["HIVE_DATA_DIR"]) / "logs")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hiveproject.settings")

import django  # noqa: E402

django.setup()

from benchlab import user_and_ssh_host  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.test import Client  # noqa: E402

from accesscontrol.models import RunAsAllowance  # noqa: E402
from jobs import remote, services  # noqa: E402
from jobs.models import Task  # noqa: E402
from monitoring.keys import public_key_line  # noqa: E402
from monitoring.models import Device  # noqa: E402
from tests.realparts import Sshd  # noqa: E402
from tests.workers import run_queued  # noqa: E402


def contract_layers() -> dict[str, int]:
    """App -> its layer in the import contract (pyproject.toml), the ground floor 0."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (layers,) = [c["layers"] for c in config["contracts"] if c["type"] == "layers"]
    return {
        name.strip(): height
        for height, layer in enumerate(reversed(layers))
        for name in layer.split("|")
    }


# Higher is higher: a call into a file of a higher layer than its caller's is a climb.
LAYERS = contract_layers()
# The layers a start is made of (the rest is what it asks below: access, bookings, hosts).
START_LAYERS = {"allocation", "jobs", "queueing", "board"}
LAUNCH = ("jobs/remote.py", "spawn")
MACHINERY = ("core/sqlite3/",)  # Django's database backend, ours only by subclass


def ours(path: str) -> str | None:
    """The file's path from the repository root, if it is one of our source files."""
    try:
        relative = Path(path).resolve().relative_to(ROOT).as_posix()
    except ValueError:
        return None
    skipped = relative.startswith((".venv", "tests/", "bench/", *MACHINERY))
    skipped = skipped or "/migrations/" in relative
    return None if skipped or not relative.endswith(".py") else relative


class Walk:
    """The files and calls of ours seen below the entry functions (and above the launch)."""

    def __init__(self, entries: set[tuple[str, str]]):
        self.entries, self.files, self.calls = entries, [], []
        self.chain: list[str] = []  # the deepest stack of our files seen
        self.reentries: list[tuple[str, str]] = []  # (caller, file already above it)

    def __call__(self, frame, event, arg):
        if event != "call" or (callee := ours(frame.f_code.co_filename)) is None:
            return
        caller, entered = None, False
        outer, stack = frame, []
        while outer is not None and not entered:
            where = (ours(outer.f_code.co_filename), outer.f_code.co_name)
            if where[0] is not None and not anonymous(outer) and stack[-1:] != [where[0]]:
                stack.append(where[0])
            if where == LAUNCH and outer is not frame:
                return  # below the launch: the SSH call itself is not the start's path
            if outer is not frame and caller is None and where[0] is not None:
                caller = where[0]
            entered = where in self.entries
            outer = outer.f_back
        if not entered:
            return
        stack.reverse()  # from the entry down to the file called
        if len(stack) > len(self.chain):
            self.chain = stack
        if stack[-1] in stack[:-2] and (stack[-2], stack[-1]) not in self.reentries:
            self.reentries.append((stack[-2], stack[-1]))
        if callee not in self.files:
            self.files.append(callee)
        if caller is not None and caller != callee and (caller, callee) not in self.calls:
            self.calls.append((caller, callee))


def anonymous(frame) -> bool:
    """A lambda, generator expression or comprehension: a piece of the function that wrote
    it, run when something it was handed to asks (``sorted`` over a generator), not a step
    down of its own."""
    name = frame.f_code.co_name
    return name.startswith("<") and name != "<module>"


def watched(walk: Walk, do):
    sys.setprofile(walk)
    try:
        return do()
    finally:
        sys.setprofile(None)


def app(path: str) -> str:
    return path.split("/")[0]


def imported_apps(path: str) -> set[str]:
    """The apps whose modules ``path`` imports (anywhere in it)."""
    found = set()
    for node in ast.walk(ast.parse((ROOT / path).read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


def climbs(walk: Walk) -> tuple[list, list]:
    """(calls up whose caller imports the callee's app: a dependency upward; calls up that
    it was handed: a registry's rule, a model's __str__, a signal's receiver)."""
    up = [(a, b) for a, b in walk.calls if LAYERS.get(app(b), 0) > LAYERS.get(app(a), 0)]
    static = [(a, b) for a, b in up if app(b) in imported_apps(a)]
    return static, [call for call in up if call not in static]


def figures(walk: Walk) -> tuple[int, ...]:
    """(files, files in the start's own layers, files that call on into another of ours,
    files on the deepest chain, calls back into a file above on the chain, climbs, calls up
    through what the caller was handed)."""
    static, handed = climbs(walk)
    upper = [f for f in walk.files if app(f) in START_LAYERS]
    through = {caller for caller, _ in walk.calls}
    deepest, back = len(walk.chain), len(walk.reentries)
    return len(walk.files), len(upper), len(through), deepest, back, len(static), len(handed)


def report(name: str, walk: Walk) -> None:
    static, handed = climbs(walk)
    print(f"\n## {name}\n")
    print(f"  deepest: {' -> '.join(walk.chain)}\n")
    for number, path in enumerate(walk.files, 1):
        mark = "*" if app(path) in START_LAYERS else " "
        print(f"{number:3}.{mark} {path}")
    for caller, callee in walk.reentries:
        print(f"     back: {caller} -> {callee}")
    for caller, callee in static:
        print(f"     climb: {caller} -> {callee}")
    for caller, callee in handed:
        print(f"     handed: {caller} -> {callee}")


def pending_task(user, host, device) -> Task:
    spec = services.TaskSpec(host=host, template="sleep 600", devices=[device])
    return services.create_job(user, name="walk", specs=[spec]).tasks.get()


def page_start(client, user, host, device) -> Walk:
    task = pending_task(user, host, device)
    walk = Walk({("jobs/views.py", "job_action"), ("jobs/actions.py", "carry_out")})
    watched(walk, lambda: client.post(f"/jobs/{task.job_id}/action", {"action": "spawn"}))
    watched(walk, run_queued)
    task.refresh_from_db()
    assert task.status == Task.Status.RUNNING, f"the page's start failed: {task.error}"
    return walk


def api_start(client, user, host, device) -> Walk:
    task = pending_task(user, host, device)
    walk = Walk({("jobs/api.py", "act"), ("jobs/actions.py", "carry_out")})
    url = f"/api/tasks/{task.pk}/act/"
    watched(walk, lambda: client.post(url, {"action": "spawn"}, content_type="application/json"))
    watched(walk, run_queued)
    assert Task.objects.get(pk=task.pk).status == Task.Status.RUNNING, "the API's start failed"
    return walk


def queue_start(user, host, device) -> Walk:
    from queueing import scheduler
    from queueing import services as queue

    request = queue.TaskRequest(template="sleep 600", kind="devices", devices=[device])
    queue.enqueue(user, name="walk", tasks=[request])
    walk = Walk({("queueing/scheduler.py", "plan_round"), ("queueing/scheduler.py", "start_job")})
    summary = watched(walk, scheduler.run_round)
    assert "1 started" in summary, summary
    return walk


def gpurun_start(user, host, device) -> Walk:
    from queueing.gpurun import Runner

    runner = Runner(host=host, owner=user, devices=[device], out=io.StringIO())
    walk = Walk({("queueing/gpurun.py", "start")})
    task, refused = watched(walk, lambda: runner.start(device, "sleep 600", {host.pk: []}))
    assert task is not None, refused
    return walk


def main() -> None:
    call_command("migrate", verbosity=0)
    workdir = Path(tempfile.mkdtemp(prefix="bench-sshd-"))
    sshd = Sshd(workdir, public_key_line(), workdir / "gpus").start()
    try:
        user, host = user_and_ssh_host(sshd)
        # This account may be root (a container): allowed, as the queue benchmark does.
        RunAsAllowance.objects.create(unix_username=getpass.getuser(), reason="benchmark")
        devices = [
            Device.objects.create(host=host, index=i, uuid=f"GPU-walk-{i}", name="Tesla T4")
            for i in range(4)
        ]
        client = Client(SERVER_NAME="localhost")
        client.force_login(user)
        walks = {
            "page (request, then worker)": page_start(client, user, host, devices[0]),
            "API (request, then worker)": api_start(client, user, host, devices[1]),
            "queue (planning, gang start)": queue_start(user, host, devices[2]),
            "gpurun": gpurun_start(user, host, devices[3]),
        }
        union = Walk(set())
        for walk in walks.values():
            union.files += [f for f in walk.files if f not in union.files]
            union.calls += [c for c in walk.calls if c not in union.calls]
            union.reentries += [c for c in walk.reentries if c not in union.reentries]
            union.chain = max(union.chain, walk.chain, key=len)
        walks["all four together"] = union
        print("| start | files | own layers | calling on | deepest | back | climbs | handed |")
        print("|---|---|---|---|---|---|---|---|")
        for name, walk in walks.items():
            print(f"| {name} | " + " | ".join(map(str, figures(walk))) + " |")
        for name, walk in walks.items():
            report(name, walk)
        print(f"\n(account {getpass.getuser()}, host {host.name} through the test sshd)")
    finally:
        for task in Task.objects.filter(status__in=Task.ACTIVE).select_related("host"):
            services.signal_task(task, None, "kill")
        remote.close_all()
        sshd.stop()


if __name__ == "__main__":
    main()
