"""Detection from stored probes: levels, allow-list, grace period, owners, one record each."""

import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from django.core import checks
from django.utils import timezone
from django_q.brokers import get_broker

from accesscontrol.models import HostAccount
from accesscontrol.services import ensure_default_group, profile_for
from core.models import Activity
from monitoring.signals import cycle_finished
from protection import config
from protection.apps import check_settings
from protection.detection import ACTIVITY, check_hosts
from protection.models import Sighting, Violation
from reservations.services import cancel_reservation, create_reservation

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.usefixtures("no_handlers")


def cycle(probe, *processes, **kwargs):
    probe.saw(*processes, **kwargs)
    check_hosts([probe.host.pk])


def test_an_intruder_appearing_during_the_reservation_is_flagged_at_first_sight(
    probe, booking, owner, other_user
):
    cycle(probe)  # the reservation's first checked probe: GPU 0 is free
    cycle(probe, (0, 4242, "other", "python train.py"))
    violation = Violation.objects.get()
    assert violation.offender == other_user and violation.offender_unix == "other"
    assert violation.reservation == booking and violation.reservation_owner == owner
    assert (violation.pid, violation.command) == (4242, "python train.py")
    assert violation.first_seen == violation.last_seen == probe.at
    assert violation.is_open and not Sighting.objects.exists()
    assert "1 new" in Activity.objects.get(name=ACTIVITY).last_summary


def slot_starting_between_two_probes(probe, owner):
    """owner's reservation of GPU 0 begins after the probe just taken, before the next."""
    ensure_default_group()
    return create_reservation(
        owner,
        title="next booking",
        devices=[probe.host.devices.get(index=0)],
        start=probe.at + timedelta(seconds=1),
        end=probe.at + timedelta(hours=1),
    )


def test_a_process_running_when_the_reservation_begins_gets_the_grace_period(probe, owner):
    # The previous user's job: running before the slot (nothing reserved, nothing to flag).
    cycle(probe, (0, 4242, "other", "python train.py"))
    slot_starting_between_two_probes(probe, owner)
    cycle(probe, (0, 4242, "other", "python train.py"))
    first_seen = probe.at
    assert not Violation.objects.exists() and Sighting.objects.get().cycles == 1
    cycle(probe, (0, 4242, "other", "python train.py"))  # still there after the grace period
    violation = Violation.objects.get()
    assert (violation.first_seen, violation.last_seen) == (first_seen, probe.at)
    assert violation.reservation_owner == owner and not Sighting.objects.exists()


def test_a_process_running_when_a_gpu_is_booked_now_gets_the_grace_period(probe, owner):
    # Booked "now": the start may lie up to a minute back, before the booking existed.
    probe.at = timezone.now() - timedelta(seconds=10)
    cycle(probe, (0, 4242, "other", "python train.py"))  # nothing reserved yet
    ensure_default_group()
    create_reservation(
        owner,
        title="right now",
        devices=[probe.host.devices.get(index=0)],
        start=timezone.now() - timedelta(seconds=30),
        end=timezone.now() + timedelta(hours=1),
    )
    probe.at = timezone.now()
    cycle(probe, (0, 4242, "other", "python train.py"))
    assert not Violation.objects.exists() and Sighting.objects.get().cycles == 1
    cycle(probe, (0, 4242, "other", "python train.py"))  # still there after the grace period
    assert Violation.objects.get().pid == 4242


def test_a_process_ending_within_the_grace_period_at_the_start_is_never_flagged(probe, owner):
    cycle(probe, (0, 4242, "other", "python train.py"))
    slot_starting_between_two_probes(probe, owner)
    cycle(probe, (0, 4242, "other", "python train.py"))
    cycle(probe)  # it was just ending
    cycle(probe)
    assert not Violation.objects.exists() and not Sighting.objects.exists()


def test_a_continuing_intrusion_is_one_record_and_ends_when_the_process_is_gone(probe, booking):
    cycle(probe)
    for _ in range(5):
        cycle(probe, (0, 4242, "other", "python train.py"))
    violation = Violation.objects.get()
    assert violation.last_seen == probe.at and violation.is_open
    cycle(probe)
    violation.refresh_from_db()
    assert violation.ended_at == probe.at
    # The same PID coming back later is a new intrusion, again flagged at first sight.
    cycle(probe, (0, 4242, "other", "python train.py"))
    assert Violation.objects.count() == 2
    assert Violation.objects.filter(ended_at=None).count() == 1


def test_the_same_probe_checked_twice_counts_once(probe, booking):
    # In the slot's first probe: one sighting, counted once.
    cycle(probe, (0, 4242, "other", "x"))
    check_hosts([probe.host.pk])  # e.g. two workers checking the same stored probe
    assert not Violation.objects.exists()
    assert Sighting.objects.get().cycles == 1
    # Later in the slot: one violation, however often its probe is checked.
    cycle(probe, (0, 4242, "other", "x"), (0, 4343, "other", "y"))
    check_hosts([probe.host.pk])
    check_hosts([probe.host.pk])
    assert sorted(Violation.objects.values_list("pid", flat=True)) == [4242, 4343]
    assert not Sighting.objects.exists()


@pytest.mark.parametrize("grace, flagged_in_cycle", [(0, 1), (1, 2), (3, 4)])
def test_the_grace_period_at_the_reservations_start_is_a_setting(
    probe, booking, settings, grace, flagged_in_cycle
):
    settings.PROTECTION_GRACE_CYCLES = grace
    cycles = 0
    while not Violation.objects.exists() and cycles < 6:
        cycle(probe, (0, 4242, "other", "x"))
        cycles += 1
    assert cycles == flagged_in_cycle
    # Whatever the grace period, a process appearing later is flagged at first sight.
    cycle(probe, (0, 4242, "other", "x"), (0, 5151, "other", "y"))
    assert Violation.objects.filter(pid=5151, first_seen=probe.at).exists()


def test_the_owners_own_processes_are_fine(probe, booking):
    for _ in range(3):
        cycle(probe, (0, 100, "owner", "python mine.py"))
    assert not Violation.objects.exists() and not Sighting.objects.exists()


def test_the_owners_account_on_that_host_is_what_counts(probe, booking, owner):
    HostAccount.objects.create(profile=profile_for(owner), host=probe.host, unix_username="o2")
    for _ in range(2):
        cycle(probe, (0, 100, "o2", "python mine.py"), (0, 101, "owner", "python other.py"))
    assert list(Violation.objects.values_list("pid", "offender_unix")) == [(101, "owner")]


def test_an_unresolvable_owner_is_reported_as_unknown_not_guessed(probe, booking):
    # None: ps could not see the PID (another PID namespace); "1234": uid without a name.
    for _ in range(2):
        cycle(probe, (0, 7, None, "python"), (0, 8, "1234", "python x"))
    violations = Violation.objects.order_by("pid")
    assert [v.offender_name for v in violations] == ["unknown owner", "unknown owner"]
    assert [v.offender for v in violations] == [None, None]


def test_the_offender_is_the_service_user_with_that_account_on_the_host(
    probe, booking, other_user, admin_user
):
    HostAccount.objects.create(profile=profile_for(other_user), host=probe.host, unix_username="ot")
    profile = profile_for(admin_user)
    profile.unix_username = "shared"
    profile.save()
    for _ in range(2):
        cycle(probe, (0, 1, "ot", "a"), (0, 2, "other", "b"), (0, 3, "shared", "c"))
    offenders = dict(Violation.objects.values_list("pid", "offender__username"))
    # "other" has another account on this host, so a process of "other" is not theirs.
    assert offenders == {1: "other", 2: None, 3: "boss"}


def test_roots_processes_are_never_blamed_on_a_user_mapped_to_root(probe, booking, admin_user):
    profile = profile_for(admin_user)
    profile.unix_username = "root"  # e.g. an admin whose tasks were set to run as root
    profile.save()
    for _ in range(2):
        cycle(probe, (0, 1, "root", "python mine.py"))
    violation = Violation.objects.get()
    assert violation.offender is None and violation.offender_name == "root"


# Containers, as monitoring.containers describes them: the owner is the label's (or None).
TRAIN_3 = {"id": "b508e2673897", "name": "train-3", "runtime": "docker"}
EVAL_7 = {"id": "ccab8193cec2", "name": "eval-7", "runtime": "podman"}


def test_a_container_without_an_owner_is_an_intruder_of_unknown_owner_never_root(
    probe, booking, admin_user
):
    profile = profile_for(admin_user)
    profile.unix_username = "root"
    profile.save()
    cycle(probe)
    cycle(probe, (0, 4242, None, "python train.py", TRAIN_3))
    violation = Violation.objects.get()
    assert (violation.offender_unix, violation.offender) == ("", None)
    assert (violation.container_id, violation.container_name) == ("b508e2673897", "train-3")
    assert violation.offender_name == "container train-3 (owner unknown)"


def test_the_owners_labelled_container_is_theirs_anothers_intrudes(probe, booking, other_user):
    cycle(probe)
    cycle(
        probe,
        (0, 100, "owner", "python mine.py", TRAIN_3),
        (0, 101, "other", "python theirs.py", EVAL_7),
    )
    violation = Violation.objects.get()
    assert (violation.pid, violation.offender) == (101, other_user)
    assert violation.offender_name == "other (container eval-7)"


def test_reserved_level_ignores_unreserved_gpus_and_strict_flags_them(probe, booking, settings):
    for _ in range(2):
        cycle(probe, (1, 5, "other", "python"))
    assert not Violation.objects.exists()
    settings.PROTECTION_LEVEL = "strict"
    # Without a reservation there is no start to tell old from new: always the grace period.
    cycle(probe, (1, 5, "other", "python"), (0, 6, "owner", "python"))
    assert not Violation.objects.exists()
    cycle(probe, (1, 5, "other", "python"), (0, 6, "owner", "python"))
    violation = Violation.objects.get()
    assert (violation.pid, violation.reservation, violation.reservation_owner) == (5, None, None)


def test_strict_level_counts_a_running_task_s_gpus_as_its_owner_s(
    probe, booking, other_user, settings
):
    # A job started by the service (by hand or from the queue) on unreserved GPU 1.
    from jobs.models import Job, Task

    settings.PROTECTION_LEVEL = "strict"
    job = Job.objects.create(owner=other_user, name="queued run")
    task = Task.objects.create(
        job=job, host=probe.host, command="python t.py", unix_username="other"
    )
    task.devices.add(probe.host.devices.get(index=1))
    Task.objects.filter(pk=task.pk).update(status=Task.Status.RUNNING)
    for _ in range(3):
        cycle(probe, (1, 5, "other", "python t.py"), (1, 6, "third", "python x.py"))
    assert list(Violation.objects.values_list("pid", "offender_unix")) == [(6, "third")]
    # Once the task has ended, its owner's leftover process is unreserved use like any other.
    Task.objects.filter(pk=task.pk).update(status=Task.Status.EXITED)
    for _ in range(2):
        cycle(probe, (1, 5, "other", "python t.py"), (1, 6, "third", "python x.py"))
    assert sorted(Violation.objects.values_list("pid", flat=True)) == [5, 6]


def test_level_off_flags_nothing_and_ends_what_was_open(probe, booking, settings):
    for _ in range(2):
        cycle(probe, (0, 5, "other", "python"))
    settings.PROTECTION_LEVEL = "off"
    cycle(probe, (0, 5, "other", "python"))
    cycle(probe, (0, 6, "other", "python"))
    cycle(probe, (0, 6, "other", "python"))
    assert Violation.objects.get().ended_at is not None
    assert not Sighting.objects.exists()


def test_allow_listed_users_and_commands_are_never_flagged(probe, booking, settings):
    settings.PROTECTION_ALLOWED_USERS = ["backup"]
    processes = [
        (0, 1, "root", "/usr/lib/xorg/Xorg :0 -seat seat0"),
        (0, 2, "backup", "anything at all"),
        (0, 3, "root", "python mine.py"),  # root, but not an allowed command
        (0, 4, "other", "/usr/lib/xorg/Xorg :1"),  # Xorg, but not root's
    ]
    for _ in range(2):
        cycle(probe, *processes)
    assert sorted(Violation.objects.values_list("pid", flat=True)) == [3, 4]
    settings.PROTECTION_ALLOWED_COMMANDS = ["*:*"]
    cycle(probe, *processes)
    assert not Violation.objects.filter(ended_at=None).exists()


def test_only_confirmed_reservations_covering_now_are_protected(probe, booking, owner):
    cancel_reservation(booking, owner)
    for _ in range(2):
        cycle(probe, (0, 5, "other", "python"))
    assert not Violation.objects.exists()


def test_a_host_that_could_not_be_probed_changes_nothing(probe, booking):
    for _ in range(2):
        cycle(probe, (0, 5, "other", "python"))
    cycle(probe, reachable=False)
    assert Violation.objects.get().is_open
    assert probe.at - Violation.objects.get().last_seen == timedelta(seconds=2)


@pytest.mark.parametrize(
    "name, value, message",
    [
        ("PROTECTION_LEVEL", "paranoid", "PROTECTION_LEVEL must be one of"),
        ("PROTECTION_ALLOWED_COMMANDS", ["Xorg"], "is not USER:PATTERN"),
        ("VIOLATION_HANDLERS", [{"options": {}}], "has no 'handler'"),
        ("VIOLATION_HANDLERS", [{"handler": "protection.nope.x"}], "protection.nope"),
    ],
)
def test_bad_settings_are_reported_at_start(settings, name, value, message):
    setattr(settings, name, value)
    errors = check_settings()
    assert errors and all(isinstance(e, checks.Error) for e in errors)
    assert message in errors[0].msg


def test_good_settings_pass_the_check(settings):
    assert check_settings() == []


def test_violation_handlers_may_be_bare_dotted_paths(settings):
    path = "protection.handlers.email.EmailHandler"
    settings.VIOLATION_HANDLERS = [path, {"handler": path, "options": {"owner": True}}]
    assert check_settings() == []
    assert config.handler_entries() == [
        {"handler": path},
        {"handler": path, "options": {"owner": True}},
    ]


def test_violation_handlers_read_from_the_environment_as_paths_or_json(tmp_path):
    path = "protection.handlers.email.EmailHandler"
    code = "from django.conf import settings; print(settings.VIOLATION_HANDLERS)"
    for raw, expected in [
        (f" {path} , protection.handlers.terminal.write_to_terminals", f"['{path}', "),
        (f'[{{"handler": "{path}", "options": {{"admins": true}}}}]', "'admins': True"),
    ]:
        env = {**os.environ, "HIVE_DATA_DIR": str(tmp_path), "VIOLATION_HANDLERS": raw}
        out = subprocess.run(
            [sys.executable, "manage.py", "shell", "-c", code],
            env=env,
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
        ).stdout
        assert expected in out


def test_a_cycle_queues_a_check_only_where_there_is_something_to_protect(
    probe, owner, settings, django_capture_on_commit_callbacks
):
    broker = get_broker()

    def queued_by_a_cycle() -> int:
        before = broker.queue_size()
        cycle_finished.send(sender=None, host_ids=[probe.host.pk], finished_at=timezone.now())
        return broker.queue_size() - before

    assert queued_by_a_cycle() == 0  # no reservation in force: nothing to check
    settings.PROTECTION_LEVEL = "strict"
    assert queued_by_a_cycle() == 1  # strict: any process may be an intruder
    settings.PROTECTION_LEVEL = "reserved"
    ensure_default_group()
    booking = create_reservation(
        owner,
        title="t",
        devices=[probe.host.devices.get(index=0)],
        start=timezone.now(),
        end=timezone.now() + timedelta(hours=1),
    )
    assert queued_by_a_cycle() == 1
    for _ in range(2):
        cycle(probe, (0, 5, "other", "python"))
    cancel_reservation(booking, owner)
    settings.PROTECTION_LEVEL = "off"
    assert queued_by_a_cycle() == 1  # one more check, to end what is open
    cycle(probe, (0, 5, "other", "python"))
    assert queued_by_a_cycle() == 0
