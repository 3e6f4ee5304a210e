"""End to end: the real probing loop over a real sshd, fake nvidia-smi naming real processes.

A reservation for ``owner`` on GPU 0, already probed once with the GPU free; real
processes appear on it afterwards (intruders at first sight); each loop cycle sends
``cycle_finished``, detection and handlers run as django-q2 tasks (inline here).
"""

import os
import pwd
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from accesscontrol.services import ensure_default_group, profile_for
from audit.models import AuditEvent
from monitoring.loop import ProbeLoop
from monitoring.models import Device
from notifications.send import send_due
from protection.models import HandlerRun, Sighting, Violation
from reservations.services import create_reservation
from tests.monitoring.test_ssh_probe import LONG_USER, UUID0, UUID1, _user_exists, gpu_row
from tests.realparts import require

pytestmark = pytest.mark.django_db(transaction=True)

ME = pwd.getpwuid(os.getuid()).pw_name
MAIL = {"handler": "protection.handlers.email.EmailHandler"}


def kill_handler(**options):
    return {"handler": "protection.handlers.kill.KillHandler", "options": options}


@pytest.fixture
def lab(ssh_host, gpus, settings, owner, other_user, tasks_run_inline):
    """owner (UNIX: this test's user) reserved GPU 0; other_user is LONG_USER there."""
    settings.VIOLATION_HANDLERS = [MAIL]
    fake = gpus("127.0.0.2")
    fake.set_gpus([gpu_row(0, UUID0), gpu_row(1, UUID1)])
    loop = ProbeLoop(holder="test")
    probe_once(loop)  # the first SSH login may outlast one cycle
    _set_unix_name(owner, ME)
    _set_unix_name(other_user, LONG_USER)
    ensure_default_group()
    start = timezone.now() - timedelta(seconds=30)
    create_reservation(
        owner,
        title="thesis",
        devices=[Device.objects.get(uuid=UUID0)],
        start=start,
        end=start + timedelta(hours=1),
    )
    probe_once(loop)  # the reservation's first checked probe: whatever appears later intrudes
    return loop, fake


def _set_unix_name(user, name):
    profile = profile_for(user)
    profile.unix_username = name
    profile.save()


def _require_other_user():
    require(os.geteuid() == 0, "starting a process as another user needs root")
    require(_user_exists(LONG_USER), f"user {LONG_USER} does not exist (.ci/run creates it)")


def probe_once(loop):
    """Cycles until one records a probe of the host (on a loaded machine a probe may take
    several intervals; the cycles in between record nothing and change nothing)."""
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if loop.cycle():
            return
    raise AssertionError("no probe finished within 90 s")


def on_gpu(fake, *procs, uuid=UUID0):
    fake.set_processes([f"{uuid}, {p.pid}, 100, {p.args[0]}" for p in procs])


def mailed(smtp) -> list[list[str]]:
    """Send what the handlers recorded, as the notifications sender does; who got mail."""
    send_due()
    return smtp.to()


def test_an_intruder_is_recorded_and_mailed_once_and_the_record_ends_with_it(
    lab, real_processes, smtp
):
    _require_other_user()
    loop, fake = lab
    intruder = real_processes(["sleep", "311"], user=LONG_USER)
    on_gpu(fake, intruder)
    probe_once(loop)  # it appeared during the reservation: flagged at first sight
    violation = Violation.objects.get()
    assert violation.first_seen == violation.last_seen and not Sighting.objects.exists()
    assert (violation.offender_unix, violation.pid) == (LONG_USER, intruder.pid)
    assert violation.offender.username == "other" and violation.command == "sleep 311"
    assert violation.reservation_owner.username == "owner"
    assert mailed(smtp) == [["other@example.org"]]
    for _ in range(3):
        probe_once(loop)
    assert Violation.objects.count() == 1 and len(mailed(smtp)) == 1
    violation.refresh_from_db()
    assert violation.last_seen > violation.first_seen and violation.is_open
    intruder.kill()
    intruder.wait()
    fake.set_processes([])  # the driver forgets a process once it has exited
    probe_once(loop)
    violation.refresh_from_db()
    assert violation.ended_at is not None and violation.last_seen < violation.ended_at


def test_jobs_still_running_when_a_reservation_begins_get_the_grace_period(
    lab, real_processes, owner, smtp
):
    """GPU 1: two jobs of another user run before owner's reservation of it begins; the one
    that ends within the grace period is never flagged, the one that goes on is."""
    _require_other_user()
    loop, fake = lab
    ending = real_processes(["sleep", "316"], user=LONG_USER)
    lingering = real_processes(["sleep", "317"], user=LONG_USER)
    on_gpu(fake, ending, lingering, uuid=UUID1)
    probe_once(loop)  # GPU 1 is not reserved yet: nothing to protect
    create_reservation(
        owner,
        title="next",
        devices=[Device.objects.get(uuid=UUID1)],
        start=timezone.now(),
        end=timezone.now() + timedelta(hours=1),
    )
    probe_once(loop)  # the slot's first probe: both still there, both get the grace period
    assert not Violation.objects.exists() and Sighting.objects.count() == 2
    ending.kill()
    ending.wait()
    on_gpu(fake, lingering, uuid=UUID1)
    probe_once(loop)
    violation = Violation.objects.get()
    assert violation.pid == lingering.pid and violation.device.uuid == UUID1
    assert not Sighting.objects.exists()
    assert mailed(smtp) == [["other@example.org"]]


def test_the_owners_own_process_produces_nothing(lab, real_processes, smtp):
    loop, fake = lab
    on_gpu(fake, real_processes(["sleep", "312"]))
    for _ in range(4):
        probe_once(loop)
    assert not Violation.objects.exists() and not Sighting.objects.exists()
    assert mailed(smtp) == []


def test_the_kill_handler_terminates_the_intruder(lab, real_processes, settings):
    """LONG_USER has no login shell, so SSH as them fails and the privileged command runs."""
    _require_other_user()
    settings.VIOLATION_HANDLERS = [
        kill_handler(grace_seconds=5, privileged_command=["kill", "-s", "{signal}", "{pid}"])
    ]
    loop, fake = lab
    intruder = real_processes(["sleep", "313"], user=LONG_USER)
    on_gpu(fake, intruder)
    probe_once(loop)
    assert intruder.wait(timeout=30) == -15
    run = HandlerRun.objects.get()
    assert run.status == "done", run.error
    assert run.outcome == f"killed pid {intruder.pid} with SIGTERM (with kill as {ME})"
    event = AuditEvent.objects.get(action="process.killed")
    assert event.detail["pid"] == intruder.pid and event.detail["offender"] == LONG_USER


def test_a_process_ignoring_sigterm_gets_sigkill_after_the_grace_period(
    lab, real_processes, settings
):
    _require_other_user()
    settings.VIOLATION_HANDLERS = [
        kill_handler(
            grace_seconds=1,
            method="privileged",
            privileged_command=["kill", "-s", "{signal}", "{pid}"],
        )
    ]
    loop, fake = lab
    # An ignored signal stays ignored across exec: a sleep that shrugs off SIGTERM.
    intruder = real_processes(["sh", "-c", 'trap "" TERM; exec sleep 315'], user=LONG_USER)
    on_gpu(fake, intruder)
    probe_once(loop)
    assert intruder.wait(timeout=30) == -9
    assert "SIGKILL" in HandlerRun.objects.get().outcome


def test_the_kill_handler_kills_over_ssh_as_the_offender(lab, real_processes, settings, owner):
    """Here the intruder is this test's own user, whom the sshd lets in with the service key."""
    settings.VIOLATION_HANDLERS = [kill_handler(grace_seconds=5, method="ssh")]
    _set_unix_name(owner, "someone-else")
    loop, fake = lab
    intruder = real_processes(["sleep", "314"])
    on_gpu(fake, intruder)
    probe_once(loop)
    assert intruder.wait(timeout=30) == -15
    assert HandlerRun.objects.get().outcome.endswith(f"(over SSH as {ME})")
    assert AuditEvent.objects.get(action="process.killed").detail["via"] == f"over SSH as {ME}"


def test_the_kill_handler_never_kills_an_unknown_owners_process(lab, real_processes, settings):
    settings.VIOLATION_HANDLERS = [
        kill_handler(privileged_command=["kill", "-s", "{signal}", "{pid}"])
    ]
    loop, fake = lab
    fake.set_processes([f"{UUID0}, 999999, 100, python"])  # a PID ps cannot see
    probe_once(loop)
    assert Violation.objects.get().offender_name == "unknown owner"
    assert HandlerRun.objects.get().status == "skipped"
    assert not AuditEvent.objects.filter(action="process.killed").exists()
