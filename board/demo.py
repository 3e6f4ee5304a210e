"""A realistic demo lab for trying the pages, taking the README's screenshots and running the
web benchmark: hosts with GPUs and history, users, bookings and running jobs. Everything goes
through the same storage functions as real probes and bookings."""

import random
from datetime import timedelta

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from accesscontrol.services import ensure_default_group, profile_for
from jobs.models import Job, Task
from monitoring.history import store_samples
from monitoring.inventory import record_probe
from monitoring.models import Device, Host
from monitoring.parsers import DiskUsage, GpuProcess, GpuSample
from monitoring.probes import ProbeResult
from reservations.models import Reservation
from reservations.services import create_reservation

PEOPLE = ["ada", "grace", "linus", "barbara", "alan", "margaret", "dennis", "frances"]
MODELS = [
    ("NVIDIA A100-SXM4-80GB", 81920, 400),
    ("NVIDIA RTX A6000", 49140, 300),
    ("NVIDIA H100 80GB HBM3", 81559, 700),
    ("NVIDIA GeForce RTX 3090", 24576, 350),
]
PASSWORD = "demo-password"  # noqa: S105 (a demo lab, printed for people to try it)


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


@transaction.atomic
def seed(
    hosts: int = 12,
    gpus: int = 8,
    history_hours: int = 6,
    seed_value: int = 17,
    down: int | None = None,
) -> dict:
    """Create the lab; returns what was made. Refuses to run twice (names are fixed)."""
    if Host.objects.filter(name__startswith="demo-").exists():
        raise ValueError("The demo lab exists already (hosts named demo-*).")
    rng = random.Random(seed_value)  # noqa: S311 (demo figures, not secrets)
    users = [make_user(name) for name in PEOPLE]
    ensure_default_group()
    made = [
        Host.objects.create(name=f"demo-{n:03d}", address=f"10.20.{n // 250}.{n % 250 + 1}")
        for n in range(1, hosts + 1)
    ]
    results = [(h, probe_result(rng, h, n, gpus, 0.55)) for n, h in enumerate(made, 1)]
    for host, result in results:
        record_probe(host, result)
    write_history(rng, results, history_hours)
    down = max(1, hosts // 30) if down is None else down
    for host in made[-down:] if down else []:
        mark_down(host)
    lose_one_gpu(made[0])
    book_and_run(rng, users, made[: max(1, hosts - down)])
    return {"hosts": hosts, "gpus": hosts * gpus, "users": PEOPLE, "password": PASSWORD}


def make_user(name: str):
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
    return user


def write_history(rng, results, hours: int) -> None:
    now = timezone.now()
    for step in range(hours * 12, 0, -1):  # one sample every 5 minutes
        at = now - timedelta(minutes=5 * step)
        store_samples(
            [
                (h, probe_result(rng, h, i, len(r.gpus), 0.55))
                for i, (h, r) in enumerate(results, 1)
            ],
            at,
        )


def mark_down(host: Host) -> None:
    host.status = Host.Status.UNREACHABLE
    host.last_error = "connection timed out after 10 s"
    host.last_probe_at = timezone.now()
    host.save(update_fields=["status", "last_error", "last_probe_at"])


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
        if n % 4 == 1:
            create_reservation(
                owner,
                title="ablation sweep",
                devices=devices[2:6],
                start=tomorrow,
                end=tomorrow + timedelta(hours=8),
            )
        if n % 5 == 1:
            run_job(owner, host, devices[-1:], f"sweep lr={rng.choice(['1e-3', '3e-4'])}")
    first = Reservation.objects.filter(title="ablation sweep").order_by("pk").first()
    if first:  # one awaits an admin's approval
        Reservation.objects.filter(pk=first.pk).update(status=Reservation.Status.PENDING)


def began_earlier(booking: Reservation, start) -> None:
    """Bookings cannot be made for the past; the demo's began an hour ago."""
    Reservation.objects.filter(pk=booking.pk).update(start=start)
    booking.slots.update(start=start)


def run_job(owner, host: Host, devices, name: str) -> None:
    job = Job.objects.create(owner=owner, name=name, template="python train.py --lr {lr}")
    task = Task.objects.create(
        job=job,
        host=host,
        template=job.template,
        parameters={"lr": "1e-3"},
        command="python train.py --lr 1e-3",
        status=Task.Status.RUNNING,
        started_at=timezone.now() - timedelta(minutes=40),
    )
    task.devices.set(devices)
