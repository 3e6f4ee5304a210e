"""Jobs through the API: a command line as a job, GPUs to start it on, logs, and stopping."""

import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from . import lab, render
from .api import Api, HiveError

ACTIVE = {"starting", "running", "stopping"}
ENDED = {"exited", "killed", "failed"}
POLL_SECONDS = 1.0  # how often `hive logs -f` asks while nothing new came (the page: 2 s)
# The server answers actions at once and its workers carry them out: how long the client
# waits to report how they went, and how often it looks.
ACTION_WAIT_SECONDS = 120.0
ACTION_POLL_SECONDS = 0.3
LOG_END_WAIT_SECONDS = 30.0  # after the end, for the log's last part to reach the server


def template_of(argv: tuple[str, ...] | list[str]) -> str:
    """The job template that runs exactly ``argv``: each argument shell-quoted, and braces
    doubled so the server's templating leaves them as literal braces."""
    if not argv:
        raise HiveError("Give the command after --, e.g. hive submit -- python train.py.")
    return shlex.join(argv).replace("{", "{{").replace("}", "}}")


def parse_env(pairs: tuple[str, ...]) -> dict[str, str]:
    env = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise HiveError(f"{pair!r}: write environment variables as NAME=value.")
        env[name] = value
    return env


@dataclass
class Place:
    host: dict  # the API's host
    gpus: list[lab.Gpu]

    def describe(self) -> str:
        names = ", ".join(g.name for g in self.gpus) or "no GPUs"
        return f"{self.host['name']} ({names})"


def host_named(api: Api, name: str) -> dict:
    hosts = api.get("hosts/")
    for host in hosts:
        if host["name"] == name:
            return host
    known = ", ".join(sorted(h["name"] for h in hosts)) or "none"
    raise HiveError(f"No host named {name!r}; hosts: {known}.")


@dataclass
class Want:
    """What `--gpus` asks for: a number of GPUs, or GPUs by name (`node-1:2,3`)."""

    count: int = 1
    named: list[str] = field(default_factory=list)  # GPU names as lab.parse_gpus reads them

    @classmethod
    def parse(cls, text: str) -> "Want":
        text = text.strip()
        if text.isdigit():
            return cls(count=int(text))
        lab.parse_gpus([text])  # refuses a malformed one before anything is asked
        return cls(named=[text])


def place_now(api: Api, want: Want, host_name: str | None) -> Place:
    """The GPUs the server chooses for ``want`` now (best fit, as its queue does, among the
    GPUs the start rule lets this user use), or why there are none."""
    if not want.named and want.count == 0:
        if not host_name:
            raise HiveError("Say where to run it: --host H (or ask for GPUs with --gpus N).")
        return Place(host_named(api, host_name), [])
    if want.named:
        body = {"devices": [d["id"] for d in lab.resolve_gpus(api, want.named)]}
    else:
        body = {"count": want.count}
        if host_name:
            body["host"] = host_named(api, host_name)["id"]
    answer = api.post("placement/", body)
    if not answer["placed"]:
        raise HiveError(refusal(answer, want, host_name))
    hosts = {g["host"] for g in answer["gpus"]}
    if len(hosts) != 1:
        raise HiveError("A job started now runs on one host: name GPUs of one host.")
    chosen = [lab.Gpu.chosen(g) for g in answer["gpus"]]
    return Place(host_named(api, hosts.pop()), chosen)


def refusal(answer: dict, want: Want, host_name: str | None) -> str:
    """The server's sentence and its first reasons, then what to do."""
    if want.named:
        head = "These GPUs cannot be used now"
    else:
        head = f"{render.counted(want.count, 'GPU')} not usable now on {host_name or 'any host'}"
    reasons = list(dict.fromkeys(r["detail"].rstrip(".") for r in answer["reasons"]))
    shown = "; ".join(reasons[:3]) + (f"; and {len(reasons) - 3} more" if len(reasons) > 3 else "")
    return f"{head}: {shown or answer['detail'].rstrip('.')}. {what_helps(answer, want)}"


def what_helps(answer: dict, want: Want) -> str:
    """--queue only where waiting can help: not when a GPU needed is refused for a lasting
    reason (only an admin can lift it) or there are not that many GPUs at all."""
    if not answer["reasons"]:
        return "Queueing cannot help: ask for fewer GPUs."
    blocked = {r["device"] for r in answer["reasons"]}
    never = {r["device"] for r in answer["reasons"] if r.get("lasting")}
    if never and (want.named or never == blocked):
        return "Queueing cannot help: only an admin can change that."
    return "Add --queue to start when they are."


def create_job(api: Api, name: str, template: str, env: dict, place: Place) -> dict:
    task = {"host": place.host["id"], "devices": [g.id for g in place.gpus], "env": env}
    return api.post("jobs/", {"name": name, "template": template, "tasks": [task]})


def start_job(api: Api, job: dict) -> None:
    """Start the job's task now; a refused start deletes the job again (nothing is left)."""
    results = api.post(f"jobs/{job['id']}/act/", {"action": "spawn"})["results"]
    refused = [r for r in results if r["error"]]
    if refused:  # refused before anything ran: leave no job behind
        api.delete(f"jobs/{job['id']}/")
        raise HiveError(f"Refused: {refused[0]['error']}")
    for task in carried_out(api, [r["task"] for r in results]):
        if task["status"] == "failed":  # kept, with why, for the owner to see
            raise HiveError(
                f"Job {job['id']} did not start: Task {task['id']} could not start: {task['error']}"
            )


def carried_out(
    api: Api, task_ids: list[int], sleep: Callable[[float], None] = time.sleep
) -> list[dict]:
    """The tasks once the server's workers have carried out the actions asked of them."""
    deadline = time.monotonic() + ACTION_WAIT_SECONDS
    while True:
        tasks = [get_task(api, pk) for pk in task_ids]
        if not any(t.get("pending_action") or t["status"] == "starting" for t in tasks):
            return tasks
        if time.monotonic() > deadline:
            raise HiveError(
                f"The server's workers have not carried it out within {ACTION_WAIT_SECONDS:g} "
                "s (they may be busy or stopped); see `hive jobs` later."
            )
        sleep(ACTION_POLL_SECONDS)


def enqueue(api: Api, name: str, template: str, env: dict, want: Want, host_name: str | None):
    """Queue the command for ``want``: N GPUs on one host (that one, or any), or named GPUs."""
    task = {"template": template, "env": env}
    if want.named:
        devices = [d["id"] for d in lab.resolve_gpus(api, want.named)]
        task.update(kind="devices", devices=devices)
    else:
        host = host_named(api, host_name)["id"] if host_name else None
        task.update(kind="one_host", gpu_count=want.count, host=host)
    return api.post("queued-jobs/", {"name": name, "tasks": [task]})


# --- looking up ------------------------------------------------------------------------------


def get_job(api: Api, job_id: int) -> dict:
    return _visible(api, f"jobs/{job_id}/", f"job {job_id}")


def get_task(api: Api, task_id: int) -> dict:
    return _visible(api, f"tasks/{task_id}/", f"task {task_id}")


def _visible(api: Api, path: str, what: str) -> dict:
    try:
        return api.get(path)
    except HiveError as exc:
        if exc.status == 404:  # the API answers 404 for others' jobs too: say both
            raise HiveError(f"No {what}, or it is not yours.", 404) from None
        raise


def status_text(task: dict) -> str:
    if task.get("host_unreachable_since"):  # not known to run: its host does not answer
        return f"host unreachable since {render.when(task['host_unreachable_since'])}"
    if task["status"] == "exited":
        return f"exited {task['exit_code']}"
    if task["status"] == "killed":
        code = task["exit_code"]
        return "stopped" if code is None else f"stopped ({code})"
    if task["status"] == "failed" and task.get("error"):
        return f"failed: {task['error']}"
    return task["status"]


def exit_status(task: dict) -> int:
    """What `hive logs -f` exits with: the task's own code when it exited by itself (as the
    shell would give it, 0-255), else 1 (stopped, or it could not run)."""
    if task["status"] == "exited" and task["exit_code"] is not None:
        return task["exit_code"] & 0xFF
    return 1


# --- logs --------------------------------------------------------------------------------------


def follow_log(
    api: Api,
    task_id: int,
    write: Callable[[str], None],
    follow: bool,
    sleep: Callable[[float], None] = time.sleep,
) -> dict:
    """Write the task's log; with ``follow``, keep writing what comes until the task ends.

    The server serves the log as its workers last fetched it, and fetches it whole once more
    after the end: once the task has ended, following goes on until the log says it is
    complete (at most LOG_END_WAIT_SECONDS). Returns the task as last read.
    """
    offset, complete, waited = 0, True, 0.0
    while True:
        task = get_task(api, task_id)
        if task["log_path"]:
            offset, complete = _drain(api, task_id, offset, write)
        ended = task["status"] in ENDED
        if not follow or (ended and (complete or waited >= LOG_END_WAIT_SECONDS)):
            if not task["log_path"] and not follow:
                raise HiveError(f"Task {task_id} is {task['status']}: it has no log yet.")
            return task
        waited += POLL_SECONDS if ended else 0
        sleep(POLL_SECONDS)


def _drain(api: Api, task_id: int, offset: int, write: Callable[[str], None]) -> tuple[int, bool]:
    """Write the log from ``offset`` as far as the server has it: (new offset, whether the
    server's copy is whole; servers that do not say are taken at their word)."""
    while True:
        piece = api.get(f"tasks/{task_id}/log/", offset=str(offset))
        write(piece["text"])
        offset = piece["next_offset"]
        if offset >= piece["size"]:
            return offset, piece.get("complete", True)


# --- stopping ------------------------------------------------------------------------------


def stop_job(api: Api, job_id: int, kill: bool) -> list[dict]:
    """SIGTERM (then SIGKILL after the server's grace period), or SIGKILL now, to every
    running task of the job; the API's results per task, once the workers sent them (with
    the host's refusal as the error)."""
    get_job(api, job_id)  # a clear "no such job" before acting
    action = "kill" if kill else "stop"
    results = api.post(f"jobs/{job_id}/act/", {"action": action})["results"]
    asked = [r["task"] for r in results if not r["error"]]
    errors = {t["id"]: t["error"] for t in carried_out(api, asked) if t["error"]}
    return [{**r, "error": r["error"] or errors.get(r["task"], "")} for r in results]
