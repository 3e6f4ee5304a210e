"""No lost updates (issue 20): an edit made from a copy read before someone else changed or
cancelled the object is refused with 409 and a clear message, and the other change stays.

The two clients are interleaved by hand: the second one acts inside the first one's request,
between its read and its write (where a hook of the code under test is called), as a racing
request would. Row locks differ by database, so this runs on both (PROFILE_PATHS).
"""

import json
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.test import Client
from django.utils import timezone

from accesscontrol.models import Grant
from accesscontrol.services import ensure_default_group, profile_for
from core.api_errors import Conflict
from jobs import services as job_services
from jobs.api import save_schedule
from jobs.models import Task
from monitoring.models import Device, Host
from queueing import services as queue_services
from queueing.models import QueuedJob
from reservations import services as booking_services
from reservations.models import Reservation

from .conftest import tomorrow


def send(client, method, url, body=None):
    return getattr(client, method)(url, json.dumps(body or {}), content_type="application/json")


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def gpus(db):
    host = Host.objects.create(name="node-1", address="10.0.0.1", status=Host.Status.UP)
    ensure_default_group()
    return [Device.objects.create(host=host, index=i, uuid=f"GPU-{i}") for i in range(2)]


@pytest.fixture
def booking(owner, gpus):
    return booking_services.create_reservation(
        owner, title="train", devices=gpus, start=tomorrow(9), end=tomorrow(12)
    )


def during(monkeypatch, module, name, meanwhile):
    """Run ``meanwhile`` (the other client) when the request under test first calls
    module.name; the other client's own calls go through unhooked."""
    original = getattr(module, name)
    pending = [meanwhile]

    def hooked(*args, **kwargs):
        if pending:
            pending.pop()()
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, hooked)


# --- reservations -----------------------------------------------------------------------------


def test_an_edit_racing_a_cancel_does_not_bring_the_booking_back(
    monkeypatch, owner, admin_user, booking
):
    url = f"/api/reservations/{booking.pk}/"
    cancel = lambda: send(signed_in(admin_user), "delete", url)  # noqa: E731
    during(monkeypatch, booking_services, "check_devices", cancel)
    response = send(signed_in(owner), "patch", url, {"title": "renamed"})
    assert response.status_code == 409
    assert response.json() == {"detail": "'train' was cancelled meanwhile; nothing was changed."}
    booking.refresh_from_db()
    assert booking.status == Reservation.Status.CANCELLED and booking.title == "train"
    assert not booking.slots.filter(holds=True).exists()


def test_an_edit_racing_another_edit_is_refused(monkeypatch, owner, admin_user, booking):
    url = f"/api/reservations/{booking.pk}/"
    other = lambda: send(signed_in(admin_user), "patch", url, {"description": "by admin"})  # noqa: E731
    during(monkeypatch, booking_services, "check_devices", other)
    response = send(signed_in(owner), "patch", url, {"title": "renamed"})
    assert response.status_code == 409 and "changed meanwhile" in response.json()["detail"]
    booking.refresh_from_db()
    assert (booking.title, booking.description) == ("train", "by admin")


def test_a_cancel_from_a_stale_copy_keeps_the_other_edit(owner, booking):
    stale = Reservation.objects.get(pk=booking.pk)
    booking_services.update_reservation(booking, owner, end=tomorrow(11))
    with pytest.raises(Conflict):
        booking_services.cancel_reservation(stale, owner)
    booking.refresh_from_db()
    assert booking.status == Reservation.Status.CONFIRMED and booking.end == tomorrow(11)


def test_an_edit_writes_only_what_it_changes(owner, booking):
    booking_services.update_reservation(booking, owner, title="renamed")
    booking.refresh_from_db()
    assert (booking.title, booking.start, booking.end) == ("renamed", tomorrow(9), tomorrow(12))


# --- tasks ------------------------------------------------------------------------------------


@pytest.fixture
def pending_task(owner, gpus):
    profile = profile_for(owner)
    profile.unix_username = "owner"
    profile.save()
    spec = job_services.TaskSpec(host=gpus[0].host, template="true", parameters={}, env={})
    job = job_services.create_job(owner, name="j", specs=[spec])
    return job.tasks.get()


def test_scheduling_a_task_that_started_meanwhile_is_refused(monkeypatch, owner, pending_task):
    import jobs.api

    def worker_starts_it():
        Task.objects.filter(pk=pending_task.pk).update(status=Task.Status.RUNNING)

    during(monkeypatch, jobs.api, "can", worker_starts_it)
    stop = (timezone.now() + timedelta(hours=2)).isoformat()
    url = f"/api/tasks/{pending_task.pk}/"
    response = send(signed_in(owner), "patch", url, {"scheduled_stop": stop})
    assert response.status_code == 409
    assert "changed meanwhile (it is running now)" in response.json()["detail"]
    pending_task.refresh_from_db()
    assert pending_task.status == Task.Status.RUNNING and pending_task.scheduled_stop is None


def test_a_schedule_writes_only_the_times(pending_task):
    stop = timezone.now() + timedelta(hours=2)
    Task.objects.filter(pk=pending_task.pk).update(error="set by a worker")
    save_schedule(pending_task, {"scheduled_stop": stop})
    pending_task.refresh_from_db()
    assert pending_task.scheduled_stop == stop and pending_task.error == "set by a worker"


# --- grants -----------------------------------------------------------------------------------


def test_a_grant_edit_racing_another_is_refused(monkeypatch, admin_user, gpus):
    import accesscontrol.api

    admin = signed_in(admin_user)
    everyone = Group.objects.get().pk
    body = {"name": "g", "scope": "all", "note": "first", "groups": [everyone]}
    created = send(admin, "post", "/api/grants/", body)
    assert created.status_code == 201, created.json()
    url = f"/api/grants/{created.json()['id']}/"

    def other_admin_edits():
        assert send(signed_in(admin_user), "patch", url, {"note": "second"}).status_code == 200

    during(monkeypatch, accesscontrol.api.GrantSerializer, "validate", other_admin_edits)
    response = send(admin, "patch", url, {"name": "renamed"})
    assert response.status_code == 409 and "changed meanwhile" in response.json()["detail"]
    grant = Grant.objects.get(name__in=["g", "renamed"])
    assert (grant.name, grant.note) == ("g", "second")


# --- queued jobs ------------------------------------------------------------------------------


def test_cancelling_a_queued_job_that_ended_meanwhile_says_so(owner, gpus):
    ensure_default_group()
    request = queue_services.TaskRequest(template="true", gpu_count=1)
    queued = queue_services.enqueue(owner, name="q", tasks=[request])
    QueuedJob.objects.filter(pk=queued.pk).update(state=QueuedJob.State.FINISHED)
    with pytest.raises(Conflict, match="'q' ended meanwhile \\(Finished\\); nothing was changed"):
        queue_services.cancel(queued, owner)
    assert QueuedJob.objects.get().state == QueuedJob.State.FINISHED
