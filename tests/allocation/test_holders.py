"""allocation.holders: who holds which GPUs over [start, end), proven against a plain
restatement of its meaning on random bookings, tasks and queue claims.

Each holder holds its GPU over an interval: a booking from its start to its end (cancelled
ones hold nothing), a task from its start to its end (open while active; a pending task
holds nothing), a claim from its round until its run ends (open). ``holders`` must return
exactly the holdings whose interval meets the range asked about (now, when no start is
given), of the GPUs asked about.
"""

from dataclasses import dataclass
from datetime import timedelta

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from allocation.holders import KINDS, QUEUE_RUN, RESERVATION, TASK, holders, register
from jobs.models import Job, Task
from queueing.models import GpuClaim, QueuedJob, QueueRun
from reservations.models import Reservation, ReservedDevice
from tests.queueing.conftest import lab  # noqa: F401  (fixture)

GPUS = 4  # node-1 has 0..2, node-2 has 3
minutes = st.integers(-180, 180)


@dataclass
class Spec:
    kind: str
    gpu: int
    start: int | None  # minutes from the base time; None: not recorded
    end: int | None  # None: open
    status: str = ""


gpu_numbers = st.integers(0, GPUS - 1)


@st.composite
def bookings(draw):
    start, status = draw(minutes), draw(st.sampled_from(Reservation.Status.values))
    return Spec(RESERVATION, draw(gpu_numbers), start, start + draw(st.integers(1, 240)), status)


@st.composite
def tasks(draw):
    status = draw(st.sampled_from(Task.Status.values))
    start = None if status == Task.Status.PENDING else draw(st.none() | st.integers(-180, 0))
    end = None
    if status in Task.ENDED:  # ended by now, after its start
        end = draw(st.integers(start if start is not None else -180, 0))
    return Spec(TASK, draw(gpu_numbers), start, end, status)


@st.composite
def claims(draw):
    state = draw(st.sampled_from([QueuedJob.State.STARTING, QueuedJob.State.RUNNING]))
    return Spec(QUEUE_RUN, draw(gpu_numbers), draw(st.integers(-180, 0)), None, state)


@st.composite
def questions(draw):
    start = draw(st.none() | minutes)
    end = draw(st.none() | st.integers(1, 240))
    return start, (None if end is None else (start or 0) + end)


def holds(spec: Spec, start: int, end: int | None) -> bool:
    """The meaning: a holder holds its GPU over [spec.start, spec.end), both ends optional."""
    if (spec.kind, spec.status) in ((RESERVATION, "cancelled"), (TASK, "pending")):
        return False
    began = spec.start is None or (spec.start < end if end is not None else spec.start <= start)
    return began and (spec.end is None or spec.end > start)


def minutes_after(base, offset: int | None):
    return None if offset is None else base + timedelta(minutes=offset)


def save(spec: Spec, gpus, owner, base) -> int | None:
    """The holder's row(s); its holder id, None where the database refused it (a GPU
    booked or claimed twice)."""

    def at(offset):
        return minutes_after(base, offset)

    gpu = gpus[spec.gpu]
    try:
        with transaction.atomic():
            if spec.kind == RESERVATION:
                booking = Reservation.objects.create(
                    owner=owner, title="b", start=at(spec.start), end=at(spec.end),
                    status=spec.status,
                )  # fmt: skip
                ReservedDevice.objects.create(
                    reservation=booking, device=gpu, start=at(spec.start), end=at(spec.end),
                    holds=spec.status != Reservation.Status.CANCELLED,
                )  # fmt: skip
                return booking.pk
            job = Job.objects.create(owner=owner, name="j")
            if spec.kind == TASK:
                task = Task.objects.create(
                    job=job, host=gpu.host, template="t", command="t", status=spec.status,
                    started_at=at(spec.start), ended_at=at(spec.end), unix_username="u",
                )  # fmt: skip
                task.devices.add(gpu)
                return task.pk
            queued = QueuedJob.objects.create(owner=owner, name="q", state=spec.status)
            run = QueueRun.objects.create(queued_job=queued, job=job, gpus=1)
            claim = GpuClaim.objects.create(device=gpu, run=run)
            GpuClaim.objects.filter(pk=claim.pk).update(created=at(spec.start))
            return run.pk
    except IntegrityError:
        return None


@pytest.fixture
def gpus(lab):  # noqa: F811
    one, two = lab.host("node-1", gpus=3), lab.host("node-2", gpus=1)
    return [*one.devices.order_by("index"), two.devices.get()]


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(bookings() | tasks() | claims(), max_size=8),
    questions(),
    st.none() | st.sets(gpu_numbers),
    st.sets(st.sampled_from(sorted(KINDS)), min_size=1),
)
def test_it_answers_exactly_the_holders_over_the_range(gpus, owner, specs, question, asked, kinds):
    base = timezone.now().replace(microsecond=0)
    start, end = question
    with transaction.atomic():
        saved = [(spec, save(spec, gpus, owner, base)) for spec in specs]
        devices = None if asked is None else [gpus[i] for i in asked]
        asked_range = minutes_after(base, start), minutes_after(base, end)
        found = holders(*asked_range, devices=devices, kinds=kinds)
        transaction.set_rollback(True)
    # Asked about now (no start): the base is now, to the minute the specs are written in.
    expected = {
        (spec.kind, gpus[spec.gpu].pk, holder)
        for spec, holder in saved
        if holder is not None
        and spec.kind in kinds
        and (asked is None or spec.gpu in asked)
        and holds(spec, start or 0, end)
    }
    assert {(h.kind, h.device_id, h.holder_id) for h in found} == expected
    assert all(h.overlaps(asked_range[0] or base, asked_range[1]) for h in found)


def test_hosts_narrow_the_answer_and_each_holding_says_whose_it_is(lab, owner):  # noqa: F811
    one, two = lab.host("node-1", gpus=1), lab.host("node-2", gpus=1)
    now = timezone.now()
    save(Spec(TASK, 0, -5, None, Task.Status.RUNNING), [lab.gpu(one, 0)], owner, now)
    save(Spec(RESERVATION, 0, -5, 60, "pending"), [lab.gpu(two, 0)], owner, now)
    [task] = holders(hosts=[one.pk])
    assert (task.kind, task.owner, task.name, task.run_as) == (TASK, "owner", "j", "u")
    assert task.end is None
    [booking] = holders(hosts=[two.pk])
    assert (booking.kind, booking.confirmed, booking.name) == (RESERVATION, False, "b")
    assert {h.kind for h in holders(kinds={TASK, RESERVATION})} == {TASK, RESERVATION}


def test_only_a_running_opportunistic_run_is_preemptible(lab, owner):  # noqa: F811
    host = lab.host("node-1", gpus=2)
    now = timezone.now()
    for index, state in enumerate([QueuedJob.State.RUNNING, QueuedJob.State.STARTING]):
        run = save(Spec(QUEUE_RUN, 0, -1, None, state), [lab.gpu(host, index)], owner, now)
        QueueRun.objects.filter(pk=run).update(opportunistic=True)
    found = {h.device_id: h.preemptible for h in holders(kinds={QUEUE_RUN})}
    assert found == {lab.gpu(host, 0).pk: True, lab.gpu(host, 1).pk: False}


def test_only_the_three_kinds_of_holder_can_be_registered():
    with pytest.raises(ValueError, match="unknown kind"):
        register("lease", lambda devices, start, end: [])
