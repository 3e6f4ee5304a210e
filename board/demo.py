"""A realistic demo lab for trying the pages, taking the manual's screenshots and running the
web benchmark: hosts with GPUs and history, users, bookings and running jobs. Its hosts are
simulated (board.demolab), so the lab stays live beside `serve`: everything else goes through
the same storage functions as real probes, bookings and tasks. ``remove`` takes it away."""

import random
import re
import time
from datetime import timedelta

from django.contrib.auth import get_user_model
from django.db import OperationalError, transaction
from django.db.models import Q
from django.utils import timezone

from accesscontrol.services import ensure_default_group, profile_for
from jobs.models import Job, Task
from monitoring.connections import pool
from monitoring.history import store_samples
from monitoring.inventory import record_probe
from monitoring.models import Device, Host
from monitoring.parsers import DiskUsage, GpuProcess, GpuSample
from monitoring.probes import ProbeResult, probe_host
from reservations.models import Reservation
from reservations.services import create_reservation

from . import demolab
from .demolab import MODELS, PEOPLE

PASSWORD = "demo-password"  # noqa: S105 (a demo lab, printed for people to try it)
# Hosts of the lab, and of earlier versions' labs (named alike, at 10.20.x.y, never probed).
DEMO_NAME = re.compile(r"^demo-\d{3,}$")


def gpu_sample(rng, host_no: int, index: int, busy: bool) -> GpuSample:
    name, memory, power = MODELS[host_no % len(MODELS)]
    util = rng.randint(55, 100) if busy else rng.randint(0, 3)
    return GpuSample(
        index=index,
        uuid=f"GPU-demo-{host_no:03d}-{index}",
        name=name,
        memory_total_mib=memory,
        memory_used_mib=rng.randint(memory // 4, memory - 500) if busy else rng.randint(0, 600),
        utilization_gpu=util,
        utilization_memory=util // 2,
        temperature_c=35 + util // 2,
        power_w=round(power * (0.2 + 0.75 * util / 100), 2),
    )


def probe_result(rng, host: Host, host_no: int, gpus: int, busy_share: float) -> ProbeResult:
    samples = [gpu_sample(rng, host_no, i, rng.random() < busy_share) for i in range(gpus)]
    processes = [
        GpuProcess(
            gpu_uuid=g.uuid,
            pid=rng.randint(1000, 99999),
            user=rng.choice(PEOPLE),
            command="python train.py --config exp.yaml",
            memory_mib=g.memory_used_mib,
        )
        for g in samples
        if g.utilization_gpu > 10
    ]
    return ProbeResult(
        host=host.name,
        reachable=True,
        status=Host.Status.UP,
        gpus=samples,
        processes=processes,
        cpu={
            "utilization": rng.randint(5, 90),
            "memory_total_mib": 515_000,
            "memory_used_mib": rng.randint(40_000, 400_000),
            "model": "AMD EPYC 7763",
            "cores": 128,
        },
        disks=[DiskUsage("/", 1_900_000, rng.randint(200_000, 1_800_000))],
        driver_version="550.54.15",
        cuda_version="12.4",
    )


def seed(
    hosts: int = 12,
    gpus: int = 8,
    history_hours: int = 6,
    seed_value: int = 17,
    down: int | None = None,
) -> dict:
    """Create the lab; returns what was made. Refuses to run twice (names are fixed).
    ``down``: how many hosts are in trouble (their GPUs fell off the bus: nvidia-smi fails)."""
    if demo_hosts().exists():
        raise ValueError(
            "The demo lab exists already (hosts named demo-*): `manage.py demo --remove` "
            "takes it away."
        )
    down = max(1, hosts // 30) if down is None else down
    try:
        with transaction.atomic():
            return _seed(hosts, gpus, history_hours, random.Random(seed_value), down)  # noqa: S311
    except BaseException:
        demolab.remove_lab()  # nothing of a lab that was not made
        raise


def _seed(hosts: int, gpus: int, history_hours: int, rng, down: int) -> dict:
    made_users = [name for name in PEOPLE if make_user(name)]
    users = list(get_user_model().objects.filter(username__in=PEOPLE).order_by("pk"))
    users.sort(key=lambda u: PEOPLE.index(u.username))
    ensure_default_group()
    made = [
        Host.objects.create(
            name=f"demo-{n:03d}",
            address=demolab.address(f"demo-{n:03d}"),
            username=demolab.MONITORING_ACCOUNT,
        )
        for n in range(1, hosts + 1)
    ]
    lab = {
        "hosts": {h.name: {"no": n, "gpus": gpus, "fault": False} for n, h in enumerate(made, 1)},
        "users": made_users,
        # Someone on a GPU of the first booking (ada's, on demo-001): protection finds it.
        "intruder": {"host": made[0].name, "gpu": min(1, gpus - 1), "user": "linus"},
    }
    demolab.write_lab(lab)
    probe(made)  # the GPUs, found as the workers find them
    for host in made[hosts - down :]:  # then the trouble began
        lab["hosts"][host.name]["fault"] = True
    demolab.write_lab(lab)
    write_history(made, history_hours)
    lose_one_gpu(made[0])
    book_and_run(rng, users, made[: max(1, hosts - down)])
    probe(made)  # the board shows the bookings' owners and the jobs at work at once
    return {"hosts": hosts, "gpus": hosts * gpus, "users": PEOPLE, "password": PASSWORD}


def demo_hosts():
    """The demo's hosts: simulated ones, and earlier versions' (10.20.x.y, named demo-NNN)."""
    named = Host.objects.filter(name__regex=DEMO_NAME.pattern)
    return named.filter(Q(address__endswith=f".{demolab.DOMAIN}") | Q(address__startswith="10.20."))


def probe(hosts: list[Host]) -> None:
    for host in hosts:
        host.refresh_from_db()
        record_probe(host, probe_host(host))


def make_user(name: str) -> bool:
    """The demo's person ``name``; True if made now (one already there is left as it is)."""
    user, created = get_user_model().objects.get_or_create(
        username=name, defaults={"email": f"{name}@lab.example.org"}
    )
    if created:
        user.set_password(PASSWORD)
        user.save()
        # Mapped to a UNIX account of the same name, as an admin maps a lab's people, so the
        # job form shows on which GPUs each may start now.
        profile = profile_for(user)
        profile.unix_username = name
        profile.save()
    return created


def write_history(hosts: list[Host], hours: int) -> None:
    """The hosts' past hours, one sample every 5 minutes, as the simulated hosts showed them."""
    lab, now = demolab.read_lab(), timezone.now()
    for step in range(hours * 12, 0, -1):
        at = now - timedelta(minutes=5 * step)
        readings = [
            (h, demolab.reading(h.name, lab["hosts"][h.name], at.timestamp())) for h in hosts
        ]
        store_samples(readings, at)


def lose_one_gpu(host: Host) -> None:
    Device.objects.create(
        host=host,
        index=9,
        uuid="GPU-demo-lost",
        name="NVIDIA A100-SXM4-80GB",
        status=Device.Status.LOST,
        last_seen=timezone.now() - timedelta(days=2),
    )


def book_and_run(rng, users, hosts) -> None:
    """Bookings now and tomorrow, and running jobs on some booked and some free GPUs."""
    now = timezone.now().replace(second=0, microsecond=0)
    start_today = now - timedelta(hours=1)
    tomorrow = (now + timedelta(days=1)).replace(hour=9, minute=0)
    for n, host in enumerate(hosts):
        devices = list(host.devices.filter(status=Device.Status.PRESENT).order_by("index"))
        owner = users[n % len(users)]
        if n % 3 == 0:
            booking = create_reservation(
                owner,
                title="thesis experiments",
                devices=devices[:2],
                start=timezone.now(),
                end=now + timedelta(hours=5),
            )
            began_earlier(booking, start_today)
        if n % 4 == 1 and devices[2:6]:
            create_reservation(
                owner,
                title="ablation sweep",
                devices=devices[2:6],
                start=tomorrow,
                end=tomorrow + timedelta(hours=8),
            )
        if n % 5 == 1:
            # Started 40 minutes (80 epochs) ago: the first ends within a minute.
            epochs = 81 if n == 1 else rng.randint(90, 240)
            lr = rng.choice(["1e-3", "3e-4"])
            run_job(owner, host, devices[-1:], f"sweep lr={lr}", lr, epochs)
    first = Reservation.objects.filter(title="ablation sweep").order_by("pk").first()
    if first:  # one awaits an admin's approval
        Reservation.objects.filter(pk=first.pk).update(status=Reservation.Status.PENDING)


def began_earlier(booking: Reservation, start) -> None:
    """Bookings cannot be made for the past; the demo's began an hour ago."""
    Reservation.objects.filter(pk=booking.pk).update(start=start)
    booking.slots.update(start=start)


def run_job(owner, host: Host, devices, name: str, lr: str, epochs: int) -> None:
    """A task that began 40 minutes ago, as its start would have left it on the host."""
    template = "python train.py --lr {lr} --epochs {epochs}"
    job = Job.objects.create(owner=owner, name=name, template=template)
    task = Task.objects.create(
        job=job,
        host=host,
        template=template,
        parameters={"lr": lr, "epochs": str(epochs)},
        command=template.format(lr=lr, epochs=epochs),
        status=Task.Status.RUNNING,
        unix_username=owner.username,
        started_at=timezone.now() - timedelta(minutes=40),
    )
    task.devices.set(devices)
    name = task.session_name
    log = demolab.DemoTransport(host).log_path("~/.gpuhive/logs", name)
    Task.objects.filter(pk=task.pk).update(
        screen_session=name, pid=demolab.task_pid(task), log_path=log
    )


def remove() -> dict:
    """Take the demo away: its hosts with everything on them (GPUs, history, bookings, tasks,
    violations), the people it made with their jobs and bookings, and its lab file. Hosts,
    people and bookings it did not make are left alone. Returns what went."""
    lab = demolab.read_lab() or {}
    users = get_user_model().objects.filter(username__in=lab.get("users", []))
    if not lab:  # the file was lost: the people it made have its address
        users = get_user_model().objects.filter(
            username__in=PEOPLE, email__in=[f"{n}@lab.example.org" for n in PEOPLE]
        )
    hosts, people = _remove_rows(users)
    for host in hosts:
        pool.close(host.pk)
    demolab.remove_lab()
    return {"hosts": [h.name for h in hosts], "users": people}


# PostgreSQL's "deadlock detected": the running service wrote the same hosts meanwhile and
# the database chose this transaction to give way. Nothing of it was written: do it again,
# after a pause of random length, so the service's next write is not met at the same moment.
DEADLOCK = "40P01"


def _remove_rows(users, attempts: int = 6) -> tuple[list, list[str]]:
    for attempt in range(1, attempts):
        try:
            return _remove_rows_once(users)
        except OperationalError as exc:
            if getattr(exc.__cause__, "sqlstate", None) != DEADLOCK:
                raise
            time.sleep(random.uniform(0.1, 0.5) * attempt)  # noqa: S311 (a pause, not a secret)
    return _remove_rows_once(users)


@transaction.atomic
def _remove_rows_once(users) -> tuple[list, list[str]]:
    # The hosts first, in one order: the service's writes to them wait for this transaction
    # instead of holding one of them while it waits for a row deleted here.
    hosts = list(demo_hosts().select_for_update().order_by("pk"))
    Task.objects.filter(Q(host__in=hosts) | Q(job__owner__in=users)).delete()
    Job.objects.filter(owner__in=users).delete()
    Reservation.objects.filter(Q(owner__in=users) | Q(slots__device__host__in=hosts)).delete()
    Host.objects.filter(pk__in=[h.pk for h in hosts]).delete()
    people = sorted(users.values_list("username", flat=True))
    users.delete()
    return hosts, people
