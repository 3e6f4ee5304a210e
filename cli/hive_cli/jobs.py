"""Jobs through the API: a command line as a job, GPUs to start it on, logs, and stopping."""

import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass

from . import lab
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


def place_now(api: Api, me: str, count: int, host_name: str | None) -> Place:
    """Where ``count`` GPUs are free for ``me`` now, as the lab's latest probe shows.

    Without a host: best fit, as the queue does (the host with the fewest free GPUs that
    still has enough), so hosts with many free GPUs stay whole for big jobs.
    """
    if count == 0:
        if not host_name:
            raise HiveError("Say where to run it: --host H (or ask for GPUs with --gpus N).")
        return Place(host_named(api, host_name), [])
    host = host_named(api, host_name) if host_name else None
    free: dict[str, list[lab.Gpu]] = {}
    for gpu in lab.gpus(api, host_name or ""):
        if gpu.free_for(me) and gpu.host_status == "up":
            free.setdefault(gpu.host, []).append(gpu)
    fitting = sorted((len(g), h) for h, g in free.items() if len(g) >= count)
    if not fitting:
        where = host_name or "any host"
        have = max(map(len, free.values()), default=0)  # only the one host's, with --host
        raise HiveError(
            f"{count} GPU{'s' if count != 1 else ''} not free now on {where} (at most {have} "
            "free); add --queue to start when they are."
        )
    chosen = fitting[0][1]
    host = host or host_named(api, chosen)
    return Place(host, free[chosen][:count])


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


def enqueue(api: Api, name: str, template: str, env: dict, count: int, host_name: str | None):
    """Queue the command for ``count`` GPUs on one host (that one, or any)."""
    host = host_named(api, host_name)["id"] if host_name else None
    task = {"template": template, "env": env, "kind": "one_host", "gpu_count": count}
    task["host"] = host
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
    if task["status"] == "exited":
        return f"exited {task['exit_code']}"
    if task["status"] == "killed":
        code = task["exit_code"]
        return "stopped" if code is None else f"stopped ({code})"
    return task["status"]


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
