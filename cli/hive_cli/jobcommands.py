"""`hive submit`, `hive jobs`, `hive logs`, `hive stop`, `hive dequeue`: run commands on the
lab's GPUs."""

import click

from . import jobs, lab, render
from .api import Api
from .session import connect, print_json, whoami

NAME_LENGTH = 80  # a job's default name: the start of its command
LATEST = 20  # jobs `hive jobs` lists without --all


@click.command(context_settings={"ignore_unknown_options": True})
@click.option("--queue", "queued", is_flag=True, help="Wait in the queue until GPUs are free.")
@click.option("-g", "--gpus", "gpus", default="1", show_default=True,
              help="How many GPUs (0: none, needs --host), or which: node-1:2,3.")  # fmt: skip
@click.option("--host", help="Run on this host (default: one with enough free GPUs).")
@click.option("-n", "--name", help="The job's name (default: the command).")
@click.option("-e", "--env", multiple=True, help="NAME=value for the command (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print the job as JSON.")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def submit(queued, gpus, host, name, env, as_json, command):
    """Run COMMAND (after --) on GPUs now, or with --queue when they are free.

    Each argument reaches the program literally (it is shell-quoted); for pipes or
    redirections say so: hive submit -- sh -c 'python train.py | tee out.txt'.
    """
    api, settings = connect()
    template = jobs.template_of(command)
    variables = jobs.parse_env(env)
    name = name or _shorten(" ".join(command))
    want = jobs.Want.parse(gpus)
    if queued:
        entry = jobs.enqueue(api, name, template, variables, want, host)
        _said(as_json, entry, _queued_line(entry, want, host))
        return
    place = jobs.place_now(api, want, host)
    job = jobs.create_job(api, name, template, variables, place)
    jobs.start_job(api, job)
    job = jobs.get_job(api, job["id"])
    task = job["tasks"][0]
    _said(
        as_json,
        job,
        f"Started job {job['id']} {name!r} on {place.describe()}: task {task['id']} is "
        f"{task['status']}. Follow it with `hive logs -f {task['id']}`.",
    )


def _shorten(text: str) -> str:
    return text if len(text) <= NAME_LENGTH else text[: NAME_LENGTH - 1] + "…"


def _said(as_json: bool, data: dict, line: str) -> None:
    if as_json:
        print_json(data)
    else:
        click.echo(line)


def _queued_line(entry: dict, want: jobs.Want, host: str | None) -> str:
    """Said as the user asked: the GPUs by name, or how many on which host (by its name)."""
    if want.named:
        what = f"{render.counted(len(entry['tasks'][0]['devices']), 'GPU')} {' '.join(want.named)}"
    else:
        what = f"{render.counted(want.count, 'GPU')} on {f'host {host}' if host else 'one host'}"
    place = f", number {entry['position']} in the queue" if entry["position"] else ""
    return (
        f"Queued {entry['name']!r} as queue entry {entry['id']} ({what}){place}: it starts by "
        f"itself when its GPUs are free. See `hive jobs`; `hive dequeue {entry['id']}` takes "
        "it out."
    )


@click.command(name="jobs")
@click.option(
    "--all",
    "everything",
    is_flag=True,
    help=f"Every job you may see (admins: all users'), not only your {LATEST} latest.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
def list_jobs(everything, as_json):
    """Your jobs, a line per task with its status and exit code, and your queued ones."""
    api, settings = connect()
    me = whoami(api, settings)
    found = api.get("jobs/")
    waiting = api.get("queued-jobs/", state="waiting")
    if not everything:
        found = [j for j in found if j["owner"] == me][:LATEST]
        waiting = [q for q in waiting if q["owner"] == me]
    if as_json:
        print_json({"jobs": found, "queued": waiting})
        return
    if not found and not waiting:
        click.echo("No jobs.")
        return
    if found:
        click.echo(_jobs_table(api, found, everything))
    if waiting:
        click.echo(("\n" if found else "") + _queue_table(waiting))


def _jobs_table(api: Api, found: list[dict], with_owner: bool) -> str:
    names = lab.device_names(api)
    headers = ["JOB", "NAME", "TASK", "HOST", "GPUS", "STATUS", "STARTED", "COMMAND"]
    rows = []
    for job in found:
        for task in job["tasks"]:
            rows.append(
                [
                    str(job["id"]),
                    _cut(job["name"], 24),
                    str(task["id"]),
                    task["host"],
                    ",".join(names.get(d, str(d)) for d in task["devices"]) or "-",
                    render.status_word(jobs.status_text(task)),
                    render.when(task["started_at"]),
                    _cut(task["command"], 40),
                ]
            )
    if with_owner:
        headers.insert(2, "OWNER")
        owners = [job["owner"] for job in found for _ in job["tasks"]]
        rows = [[*row[:2], owner, *row[2:]] for row, owner in zip(rows, owners, strict=True)]
    return render.table(headers, rows)


def _queue_table(waiting: list[dict]) -> str:
    rows = [
        [
            str(q["id"]),
            _cut(q["name"], 24),
            str(q["position"] or "-"),
            _cut("; ".join(q["reasons"]) or "not looked at yet", 60),
        ]
        for q in waiting
    ]
    return render.table(["QUEUED", "NAME", "PLACE", "WAITING FOR"], rows)


def _cut(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


@click.command()
@click.argument("task_id", metavar="TASK", type=int)
@click.option("-f", "--follow", is_flag=True, help="Keep printing until the task ends (Ctrl-C).")
def logs(task_id, follow):
    """Print a task's log (TASK is the task's number, as `hive jobs` shows).

    \b
    Exit status with -f, once the task ended: the task's own exit code; 1 when it was
    stopped or failed to run (the last line, on stderr, says which); 130 on Ctrl-C.
    Without -f: 0. Errors (no such task, no log yet, server unreachable): 1.
    """
    api, _ = connect()
    try:
        task = jobs.follow_log(api, task_id, lambda text: click.echo(text, nl=False), follow)
    except KeyboardInterrupt:
        click.echo("", err=True)
        raise SystemExit(130) from None  # the shell's code for Ctrl-C
    if follow:
        click.echo(f"Task {task_id} {jobs.status_text(task)}.", err=True)
        raise SystemExit(jobs.exit_status(task))


@click.command()
@click.argument("job_id", metavar="JOB", type=int)
@click.option("--kill", is_flag=True, help="SIGKILL now instead of SIGTERM.")
def stop(job_id, kill):
    """Stop a job's running tasks: SIGTERM, then SIGKILL after the grace period (or --kill)."""
    api, _ = connect()
    results = jobs.stop_job(api, job_id, kill)
    if not results:
        job = jobs.get_job(api, job_id)
        click.echo(f"Job {job_id} has no running tasks (it is {job['status']}).")
        return
    failed = [r for r in results if r["error"]]
    for result in results:
        what = result["error"] or ("killed" if kill else "stopping (SIGTERM sent)")
        click.echo(f"Task {result['task']}: {what}", err=bool(result["error"]))
    if failed:
        raise SystemExit(1)


@click.command()
@click.argument("ids", metavar="QUEUED...", nargs=-1, type=int, required=True)
def dequeue(ids):
    """Take queue entries out of the queue (QUEUED as `hive jobs` shows); one that is
    running is stopped gracefully first."""
    api, _ = connect()
    for queued_id in ids:
        entry = api.post(f"queued-jobs/{queued_id}/cancel/", {})
        if entry["state"] == "stopping":
            click.echo(f"Stopping {entry['name']!r} (queue entry {queued_id}); it will not rerun.")
        else:
            click.echo(f"Took {entry['name']!r} (queue entry {queued_id}) out of the queue.")


COMMANDS = [submit, list_jobs, logs, stop, dequeue]
