"""gpurun: run a stream of commands, one per free GPU, like simple_gpu_scheduler, but through
the service: each command becomes a task of one job (visible on the web), run in GNU screen
on the host as the user, with CUDA_VISIBLE_DEVICES set to its GPU.

One worker thread per GPU takes the next line, starts the task, waits for its end and takes
the next line, so a GPU is reused as soon as it frees. An end is said at once and recorded
once the next command on its GPU has started (it is not on the way from one to the next),
or before gpurun returns. While gpurun runs, its job is marked as still fed (Job.fed_until,
renewed every RENEW_FEED), so that a gap between two commands is not told as the job's end;
gpurun tells the end when it returns, however it returns, and the service's sync does once
the mark lapses if gpurun was killed outright. Each start checks the start rule
(allocation.rule) once, given what nvidia-smi on the host showed right after our last
task there ended (so any process is someone else's), in the same transaction that records
the task and claims it: a refused start leaves nothing behind. A GPU refused is skipped, and
said so, until it passes; one refused for a lasting reason (no grant now or later, no
account, a ban without end: see allocation.rule) is given up, and when every GPU asked
is given up gpurun ends with an error instead of waiting for ever. On the service's own
machine each worker keeps one shell open as the user (jobs.remote.launchers), which runs its
starts and waits.
"""

import threading
from collections import deque
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import DatabaseError, connection, transaction
from django.template.defaultfilters import pluralize
from django.utils import timezone

from accesscontrol.accounts import RunAs
from allocation.rule import may_start
from jobs import services as job_services
from jobs.models import Job, Task
from jobs.tasks import tell_job_ended
from monitoring import parsers
from monitoring.connections import pool
from monitoring.models import Device, Host
from monitoring.transport import TransportError


class Lines:
    """Commands as they come (a pipe, a FIFO, `tail -f`), shared by the GPU workers.

    A worker takes a line only once its GPU passed the check, so a skipped GPU never holds
    a command back; one whose GPU failed the check between the two gives the line back.
    """

    def __init__(self):
        self.commands: deque[str] = deque()
        self.ended = False
        self.ready = threading.Condition()

    def read(self, stream) -> None:
        for line in iter(stream.readline, ""):
            command = line.strip()
            if command and not command.startswith("#"):
                with self.ready:
                    self.commands.append(command)
                    self.ready.notify()
        with self.ready:
            self.ended = True
            self.ready.notify_all()

    def take(self, timeout: float) -> str | None:
        """The next command; None when none came in time. Raises EOFError at the end."""
        with self.ready:
            if not self.commands and not self.ended:
                self.ready.wait(timeout)
            if self.commands:
                return self.commands.popleft()
            if self.ended:
                raise EOFError
            return None

    def finished(self) -> bool:
        with self.ready:
            return self.ended and not self.commands

    def waiting(self) -> bool:
        """Whether a command waits to be taken now."""
        with self.ready:
            return bool(self.commands)

    def give_back(self, command: str) -> None:
        with self.ready:
            self.commands.appendleft(command)
            self.ready.notify()


def gpu_query_argv() -> list[str]:
    """nvidia-smi asked for every process on the host's GPUs, bounded in time on the host."""
    limit = settings.NVIDIA_SMI_TIMEOUT
    return [
        "timeout",
        "-k",
        "2",
        f"{limit:g}",
        "nvidia-smi",
        f"--query-compute-apps={','.join(parsers.APP_QUERY_FIELDS)}",
        "--format=csv,noheader,nounits",
    ]


def gpu_processes(host: Host) -> list[tuple]:
    """(gpu_uuid, pid, memory, name) of every process on the host's GPUs, asked now."""
    result = pool.run(host, gpu_query_argv(), timeout=settings.NVIDIA_SMI_TIMEOUT + 5)
    if not result.ok:
        raise TransportError(f"nvidia-smi failed: {(result.stdout + result.stderr).strip()}")
    return parsers.parse_app_query(result.stdout)


# What a task's end changes, read again after each wait (not its argv, env and command).
ENDING = ["status", "exit_code", "error", "ended_at"]

# Each GPU's worker has a database connection of its own. With SQLite's default page cache
# (2 MB a connection) each cache kept the pages of the rows the run added (tasks, audit
# events, their indexes): gpurun grew by about 14 KB a start, to 66 MB after 1,000 starts.
# A start reads and writes a few pages, and the facts it checks are kept above the database
# (accesscontrol.changes), so a small cache costs nothing measurable (bench/queue_gpurun.py).
WORKER_PAGE_CACHE_KIB = 64

# A gpurun that stops renewing its job's feed (killed outright) lets it lapse after FEED; the
# service's next sync then tells the job's end. Renewed well before, so a slow database or a
# busy machine does not make a running gpurun's gap look like the end.
FEED = timedelta(seconds=60)
RENEW_FEED = timedelta(seconds=15)


def keep_page_cache_small() -> None:
    """Bound this thread's SQLite page cache (for the rest of its connection's life)."""
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute(f"PRAGMA cache_size = -{WORKER_PAGE_CACHE_KIB}")


@dataclass
class Runner:
    host: Host
    owner: object
    devices: list[Device]
    out: object  # a writable text stream
    name: str = "gpurun"
    wait_per_call: float = 1.0  # seconds the host waits per call; Ctrl-C is noticed within it
    job: Job | None = None
    started: int = 0
    failed: int = 0
    running: dict = field(default_factory=dict)  # GPU index -> its task
    given_up: set = field(default_factory=set)  # GPU indices the owner can never use
    # GPU index -> (its last task, that task's end as the host told it), until recorded.
    told: dict = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)  # the counts and the output
    claiming: threading.Lock = field(default_factory=threading.Lock)  # a start's transaction
    stopping: threading.Event = field(default_factory=threading.Event)
    fed_at: datetime | None = None  # when the job's feed was last renewed

    def say(self, text: str) -> None:
        with self.lock:
            self.out.write(text + "\n")
            self.out.flush()

    def run(self, stream) -> int:
        """Run the stream's commands; the exit status. However it returns, the job is fed no
        more then, and its end is told once its tasks have all ended."""
        try:
            return self.run_all(stream)
        finally:
            self.end_feed()

    def run_all(self, stream) -> int:
        lines = Lines()
        threading.Thread(target=lines.read, args=(stream,), daemon=True).start()
        workers = [
            threading.Thread(target=self.work, args=(d, lines), daemon=True) for d in self.devices
        ]
        for worker in workers:
            worker.start()
        try:
            for worker in workers:
                while worker.is_alive():
                    worker.join(0.5)
                    self.keep_feeding()
        except KeyboardInterrupt:
            self.stop_all()
            return 130
        if len(self.given_up) == len(self.devices):
            self.say(f"gpurun: {self.owner} can never use any of the GPUs asked; nothing more runs")
            return 1
        job = f" (job {self.job.pk})" if self.job else ""
        commands = f"{self.started} command{pluralize(self.started)}"
        self.say(f"gpurun: {commands} run, {self.failed} failed{job}")
        return 1 if self.failed else 0

    # --- the job's feed ---------------------------------------------------------------------

    def keep_feeding(self) -> None:
        """Renew the job's feed (created with it, in ``claim``) every RENEW_FEED."""
        now = timezone.now()
        job = self.job
        if job is None or self.fed_at is None or now < self.fed_at + RENEW_FEED:
            return
        self.fed_at = now  # a failure is said once and tried again at the next renewal
        try:
            Job.objects.filter(pk=job.pk).update(fed_until=now + FEED)
        except DatabaseError as exc:
            self.say(f"gpurun: could not renew job {job.pk}'s feed: {exc}")

    def end_feed(self) -> None:
        """Fed no more: the job's end is told now if its tasks have all ended, else when the
        last one's end is recorded. A failure keeps the feed, for the sync to tell once it
        lapses."""
        with self.claiming:  # not while a start's transaction may still take the job back
            if self.job is None:
                return
            with transaction.atomic():
                Job.objects.filter(pk=self.job.pk).update(fed_until=None)
                tell_job_ended(self.job.pk)

    # --- one GPU ---------------------------------------------------------------------------

    def work(self, device: Device, lines: Lines) -> None:
        # On this machine one shell per account and GPU runs the starts and waits.
        with job_services.remote.launchers(self.host):
            self.run_lines(device, lines)

    def run_lines(self, device: Device, lines: Lines) -> None:
        try:
            keep_page_cache_small()
            said = ""
            seen = None  # the GPU processes nvidia-smi showed right after our last task ended
            while not self.stopping.is_set():
                if not lines.waiting():  # no next start to record the last end after
                    self.record_end(device)
                try:
                    command = lines.take(timeout=1.0)
                except EOFError:
                    return
                if command is None:
                    continue
                # The start checks the rule once, with the processes nvidia-smi shows now;
                # a refused start leaves nothing behind and says why.
                processes, why = self.processes_now(seen)
                said, seen, task = self.check(device, said, why), None, None
                if not said:
                    task, refused = self.start(device, command, processes)
                    said = self.check(device, said, refused)
                # The last end is recorded once the next command runs (or could not): not on
                # the GPU's way from one command to the next. Its finished line was said.
                self.record_end(device)
                if task is not None:
                    seen = self.wait_for_end(device, task)
                elif said:  # another GPU may take the line while this one waits
                    lines.give_back(command)
                    said = self.wait_until_usable(device, said, lines, processes)
                    if device.index in self.given_up:
                        return
        finally:
            self.record_end(device)
            connection.close()

    def check(self, device: Device, said: str, why: str) -> str:
        """``why`` the GPU cannot be used now ("" if it can), said once per change."""
        if why != said:
            self.say(
                f"gpu {device.index} skipped: {why}" if why else f"gpu {device.index} usable again"
            )
        return why

    def wait_until_usable(self, device: Device, said: str, lines: Lines, processes) -> str:
        """Check the GPU every second until it is usable or nothing is left to run; give it
        up at once when it never will be (a lasting reason: waiting would be for ever)."""
        lasting = self.lasting(device, processes)
        while said and not lasting and not self.stopping.wait(1.0) and not lines.finished():
            why, lasting = self.look(device)
            said = self.check(device, said, why)
        if said and lasting:
            with self.lock:
                self.given_up.add(device.index)
            self.say(f"gpu {device.index} given up: {self.owner} can never use it (ask an admin)")
        return said

    def lasting(self, device: Device, processes) -> bool:
        """Whether waiting cannot make the GPU usable by the owner (only an admin can)."""
        reasons = may_start(self.owner, [device], job=self.job, processes=processes)
        return any(reason.lasting for reason in reasons)

    def look(self, device: Device, seen: str | None = None) -> tuple[str, bool]:
        """(why the GPU cannot be used now, "" if it can; whether that reason is lasting),
        asking the host what runs on it. ``seen``: as for processes_now."""
        processes, why = self.processes_now(seen)
        if processes is None:
            return why, False
        reasons = may_start(self.owner, [device], job=self.job, processes=processes)
        why = reasons[0].text if reasons else ""
        return why, any(reason.lasting for reason in reasons)

    def processes_now(self, seen: str | None = None) -> tuple[dict | None, str]:
        """(the host's GPU processes, as the start rule takes them, or None; "" or why the
        host could not be asked). ``seen``: nvidia-smi's answer right after our last task
        ended, if one came; else it is asked now."""
        found = None
        if seen is not None:
            with suppress(parsers.ParseError):  # unreadable then: asked again below
                found = parsers.parse_app_query(seen)
        try:
            found = gpu_processes(self.host) if found is None else found
        except (TransportError, parsers.ParseError) as exc:
            return None, f"cannot ask {self.host.name}: {exc}"
        rows = [{"gpu_uuid": uuid, "pid": pid, "name": name} for uuid, pid, _, name in found]
        return {self.host.pk: rows}, ""

    def start(self, device: Device, command: str, processes=None) -> tuple[Task | None, str]:
        """(the started task, "") or (None, why the GPU is refused now): a start refused by its
        checks (reserved by someone else now, no access) is rolled back and leaves no task."""
        # Braces in a plain command are not template fields.
        template = command.replace("{", "{{").replace("}", "}}")
        spec = job_services.TaskSpec(host=self.host, template=template, devices=[device])
        try:
            task, account = self.claim(spec, processes)
        except ValidationError as exc:
            return None, exc.messages[0]
        try:
            task = job_services.launch_claimed(task, claimed_as=account)
        except ValidationError as exc:
            with self.lock:
                self.failed += 1
            self.say(f"could not start on gpu {device.index}: {' '.join(exc.messages)}: {command}")
            return None, ""
        with self.lock:
            self.started += 1
            self.running[device.index] = task
        self.say(f"started  #{task.pk} gpu {device.index}: {command}")
        return task, ""

    def claim(self, spec: job_services.TaskSpec, processes) -> tuple[Task, RunAs]:
        """A new task, checked by the start rule and claimed, in one transaction, and the
        account it runs as; the first one creates the job (taken back with it if its start
        is refused)."""
        with self.claiming:
            job = self.job
            try:
                with transaction.atomic():
                    if self.job is None:
                        self.job = job_services.create_job(
                            self.owner,
                            name=self.name,
                            specs=[spec],
                            description="Commands run by gpurun.",
                        )
                        task = self.job.tasks.get()
                        self.fed_at = timezone.now()  # fed before its first task can end
                        self.job.fed_until = self.fed_at + FEED
                        self.job.save(update_fields=["fed_until"])
                    else:
                        task = job_services.add_task(self.job, spec)
                    account = job_services.claim_start(task, self.owner, processes)
            except BaseException:  # rolled back: a job made here is gone too
                self.job = job
                raise
            return task, account

    def wait_for_end(self, device: Device, task: Task) -> str | None:
        """Wait for the task to end and say so; the end is recorded by ``record_end``, unless
        a sync found it. Returns what nvidia-smi showed right after, when the host's wait saw
        the end (it asks in the same call: the next start needs it at once)."""
        while task.status not in Task.ENDED:
            if self.stopping.is_set():
                return None  # interrupted: stop_all stops it
            try:
                # The host waits for the exit file; a sync only when none came in time.
                state, seen = job_services.await_end(
                    task, self.wait_per_call, then=gpu_query_argv()
                )
                if state is not None:
                    with self.lock:
                        self.told[device.index] = task, state
                    self.finished(device, task, state.exit_code)
                    return seen
                job_services.sync_tasks([task])
            except job_services.remote.RemoteError as exc:
                self.say(f"cannot check #{task.pk}: {exc}")
            task.refresh_from_db(fields=ENDING)
        # Ended without an exit file seen here: found by a sync (this one's or the service's).
        self.finished(device, task, task.exit_code)
        self.count_end(task)
        return None

    def finished(self, device: Device, task: Task, code: int | None) -> None:
        """Say the task's end: its exit code, or its status when it has none (failed)."""
        with self.lock:
            self.running.pop(device.index, None)
        outcome = f"exit {code}" if code is not None else task.get_status_display().lower()
        self.say(f"finished #{task.pk} gpu {device.index} {outcome}: {task.command}")

    def record_end(self, device: Device) -> None:
        """Record the end of the GPU's last task, if one was told and not yet recorded."""
        with self.lock:
            ended = self.told.pop(device.index, None)
        if ended is not None:
            task, state = ended
            job_services.record_end(task, state)
            task.refresh_from_db(fields=ENDING)  # a stop meanwhile made it "killed"
            self.count_end(task)

    def count_end(self, task: Task) -> None:
        with self.lock:
            self.failed += not (task.status == Task.Status.EXITED and task.exit_code == 0)

    def stop_all(self) -> None:
        self.stopping.set()
        with self.lock:
            busy = list(self.running.values())
        self.say(f"gpurun: interrupted, stopping {len(busy)} running tasks")
        for device in self.devices:  # ends told but not yet recorded: gpurun returns now
            self.record_end(device)
        for task in busy:
            try:
                job_services.stop_task(task, self.owner)
            except ValidationError as exc:
                self.say(f"could not stop #{task.pk}: {' '.join(exc.messages)}")
