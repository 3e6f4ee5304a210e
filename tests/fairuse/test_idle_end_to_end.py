"""End to end: the real probing loop over a real sshd, fake nvidia-smi naming real processes.

owner reserved GPUs 0 and 1 of node-2; each loop cycle sends ``cycle_finished`` and the
idle check runs as a django-q2 task (inline). The site rule releases at once (no minutes),
so each probe is one step: idle seen and warned, then released unless kept or in use.
"""

import os
import pwd
import time
from datetime import timedelta

import pytest
from django.core import mail
from django.urls import reverse
from django.utils import timezone

from accesscontrol.services import ensure_default_group, profile_for
from audit.models import AuditEvent
from fairuse.models import IdleNotice
from monitoring.loop import ProbeLoop
from monitoring.models import Device
from notifications.send import send_due
from reservations.models import Reservation
from reservations.services import create_reservation
from tests.fairuse.conftest import gpu_row
from tests.monitoring.test_ssh_probe import UUID0, UUID1

pytestmark = pytest.mark.django_db(transaction=True)

ME = pwd.getpwuid(os.getuid()).pw_name
State = IdleNotice.State


@pytest.fixture
def lab(ssh_host, gpus, owner, release_at_once, tasks_run_inline):
    fake = gpus("127.0.0.2")
    fake.set_gpus([gpu_row(0, UUID0), gpu_row(1, UUID1)])
    loop = ProbeLoop(holder="test")
    probe_once(loop)  # GPUs found; the first SSH login may outlast one cycle
    profile = profile_for(owner)
    profile.unix_username = ME
    profile.save()
    ensure_default_group()
    return loop, fake


def book(owner, *uuids) -> Reservation:
    start = timezone.now() - timedelta(seconds=30)
    return create_reservation(
        owner,
        title="thesis",
        devices=list(Device.objects.filter(uuid__in=uuids)),
        start=start,
        end=start + timedelta(hours=2),
    )


def probe_once(loop):
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if loop.cycle():
            return
    raise AssertionError("no probe finished within 90 s")


def on_gpu(fake, *procs, uuid=UUID0):
    fake.set_processes([f"{uuid}, {p.pid}, 100, {p.args[0]}" for p in procs])


def test_an_idle_booking_is_warned_then_released_and_recorded(lab, owner):
    loop, fake = lab
    booking = book(owner, UUID0, UUID1)
    probe_once(loop)  # both GPUs idle: warned
    send_due()  # as the notifications sender would
    notice = IdleNotice.objects.get()
    assert notice.state == State.WARNED and notice.devices.count() == 2
    assert [m.to for m in mail.outbox] == [["owner@example.org"]]
    assert "hive keep" in mail.outbox[0].body
    assert reverse("fairuse-keep", args=[booking.pk]) in mail.outbox[0].body
    probe_once(loop)  # still idle after the grace: the booking ends now
    send_due()
    notice.refresh_from_db()
    booking.refresh_from_db()
    assert notice.state == State.RELEASED and booking.end <= timezone.now()
    assert "every GPU" in booking.note and not booking.slots.filter(end__gt=timezone.now())
    assert len(mail.outbox) == 2 and "given back" in mail.outbox[1].subject
    actions = list(
        AuditEvent.objects.filter(action__startswith="reservation.idle")
        .values_list("action", flat=True)
        .order_by("pk")
    )
    assert actions == ["reservation.idle_warned", "reservation.idle_released"]
    probe_once(loop)  # over: nothing more happens
    send_due()
    assert IdleNotice.objects.count() == 1 and len(mail.outbox) == 2


def test_a_booking_kept_by_a_click_is_not_released(lab, owner, client):
    loop, fake = lab
    booking = book(owner, UUID0)
    probe_once(loop)
    assert IdleNotice.objects.get().state == State.WARNED
    client.force_login(owner)
    url = reverse("fairuse-keep", args=[booking.pk])
    assert client.get(url).status_code == 200  # the mail's link asks; it does not act
    assert IdleNotice.objects.get().state == State.WARNED
    assert client.post(url).status_code == 302
    for _ in range(2):
        probe_once(loop)
    booking.refresh_from_db()
    notice = IdleNotice.objects.get()
    assert notice.state == State.KEPT and notice.kept_by == owner
    assert booking.end > timezone.now() + timedelta(hours=1)
    assert AuditEvent.objects.filter(action="reservation.idle_kept", actor=owner).exists()


def test_never_while_the_owners_process_runs_and_only_idle_gpus_go(lab, owner, real_processes):
    loop, fake = lab
    booking = book(owner, UUID0, UUID1)
    mine = real_processes(["sleep", "331"])
    on_gpu(fake, mine, uuid=UUID0)  # GPU 0 shows the owner's process, at 0 % load
    probe_once(loop)
    notice = IdleNotice.objects.get()
    assert [d.uuid for d in notice.devices.all()] == [UUID1]
    probe_once(loop)  # GPU 1 goes back, GPU 0 stays booked
    booking.refresh_from_db()
    assert IdleNotice.objects.get().state == State.RELEASED
    assert [d.uuid for d in booking.devices.all()] == [UUID0]
    assert booking.end > timezone.now() and "GPU(s) node-2:1 given back" in booking.note
    for _ in range(2):
        probe_once(loop)  # the process still runs: GPU 0 is never idle
    assert IdleNotice.objects.count() == 1


def test_load_alone_counts_as_use_and_a_warning_ends_when_use_resumes(lab, owner):
    loop, fake = lab
    booking = book(owner, UUID0)
    fake.set_gpus([gpu_row(0, UUID0, utilization=90), gpu_row(1, UUID1)])
    probe_once(loop)
    assert not IdleNotice.objects.exists()
    fake.set_gpus([gpu_row(0, UUID0), gpu_row(1, UUID1)])
    probe_once(loop)
    assert IdleNotice.objects.get().state == State.WARNED
    fake.set_gpus([gpu_row(0, UUID0, utilization=90), gpu_row(1, UUID1)])
    probe_once(loop)
    booking.refresh_from_db()
    assert IdleNotice.objects.get().state == State.RESOLVED and booking.end > timezone.now()
