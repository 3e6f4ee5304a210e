"""Every job page and API endpoint for anonymous, owner, another user and a superuser.

Owners see and act on their jobs; others get 404 (they cannot tell a job exists); superusers
see everything and may stop tasks, but starting always runs as the owner, so only the owner
may start. Logs follow "view": owner and superusers only.
"""

import pytest
from django.urls import reverse

from jobs import services
from jobs.models import Job, Task
from jobs.services import TaskSpec
from jobs.tasks import sync_running
from tests.workers import run_queued

from .conftest import wait_for

PERSONAS = ["anonymous", "owner", "other", "admin"]


@pytest.fixture
def finished(runner, node):
    """A job whose one task ran (so it has a log) and one pending task."""
    specs = [TaskSpec(host=node, template="echo hello {who}", parameters={"who": w}) for w in "ab"]
    job = services.create_job(runner, name="perm", specs=specs)
    ran = services.spawn_task(job.tasks.first(), runner)
    # What the workers do after each cycle: the sync, then the logs (whole once ended).
    assert wait_for(lambda: sync_running() and _ended(ran))
    return job


def _ended(task):
    task.refresh_from_db()
    return task.status in Task.ENDED


@pytest.fixture
def as_persona(client, runner, other_user, admin_user):
    def login(persona):
        user = {"owner": runner, "other": other_user, "admin": admin_user}.get(persona)
        if user:
            client.force_login(user)
        return client

    return login


def page_urls(job):
    task = job.tasks.first()
    return [
        reverse("job-list"),
        reverse("job-new"),
        reverse("job-rows"),
        reverse("job-distributed"),
        reverse("job-detail", args=[job.pk]),
        reverse("task-log", args=[task.pk]),
        reverse("task-log-download", args=[task.pk]),
    ]


GET_PAGE = {  # persona -> expected status for pages about the owner's job
    "anonymous": 302,
    "owner": 200,
    "other": 404,
    "admin": 200,
}


@pytest.mark.parametrize("persona", PERSONAS)
def test_pages(finished, as_persona, persona):
    client = as_persona(persona)
    for url in page_urls(finished):
        expected = GET_PAGE[persona]
        if persona == "other" and url.rstrip("/").endswith(("jobs", "new", "rows", "distributed")):
            expected = 200  # their own (empty) list and the creation forms
        response = client.get(url)
        assert response.status_code == expected, url
        if expected == 200 and url.endswith("log.txt"):
            assert response.content == b"hello a\n"


@pytest.mark.parametrize("persona", PERSONAS)
def test_the_list_shows_only_what_one_may_see(finished, as_persona, persona):
    response = as_persona(persona).get(reverse("job-list"))
    if persona == "anonymous":
        assert response.status_code == 302
        return
    assert ("perm" in response.content.decode()) == (persona in ("owner", "admin"))


@pytest.mark.parametrize(
    ("persona", "status", "started"),
    [("anonymous", 302, False), ("owner", 302, True), ("other", 404, False), ("admin", 302, False)],
)
def test_start_from_the_page_runs_only_for_the_owner(
    finished, as_persona, persona, status, started
):
    pending = finished.tasks.get(status=Task.Status.PENDING)
    url = reverse("job-action", args=[finished.pk])
    response = as_persona(persona).post(url, {"action": "spawn", "tasks": [pending.pk]})
    assert response.status_code == status
    pending.refresh_from_db()
    assert pending.status == (Task.Status.STARTING if started else Task.Status.PENDING)
    assert run_queued() == started  # the workers start it
    pending.refresh_from_db()
    assert (pending.status != Task.Status.PENDING) == started
    assert pending.status != Task.Status.STARTING


@pytest.mark.parametrize(
    ("persona", "status"), [("anonymous", 302), ("owner", 302), ("other", 404), ("admin", 302)]
)
def test_duplicate_from_the_page(finished, as_persona, persona, status):
    response = as_persona(persona).post(reverse("job-duplicate", args=[finished.pk]))
    assert response.status_code == status
    copies = Job.objects.filter(name="perm (copy)")
    assert copies.count() == (1 if status == 302 and persona != "anonymous" else 0)
    if copies:  # the copy belongs to (and will run as) whoever duplicated it
        assert copies.get().owner.username == {"owner": "owner", "admin": "boss"}[persona]


API_READ = {"anonymous": (401, 403), "owner": (200,), "other": (404,), "admin": (200,)}


@pytest.mark.parametrize("persona", PERSONAS)
def test_api_reads(finished, as_persona, persona):
    client = as_persona(persona)
    task = finished.tasks.first()
    for url in [
        f"/api/jobs/{finished.pk}/",
        f"/api/tasks/{task.pk}/",
        f"/api/tasks/{task.pk}/log/",
        f"/api/tasks/{task.pk}/download/",
    ]:
        assert client.get(url).status_code in API_READ[persona], url
    if API_READ[persona] == (200,):  # what the job page and the log page follow
        tasks = client.get(f"/api/jobs/{finished.pk}/").json()["tasks"]
        assert [(t["status"], t["status_display"]) for t in tasks] == [
            ("exited", "Exited"),
            ("pending", "Pending"),
        ]
        log = client.get(f"/api/tasks/{task.pk}/log/").json()
        assert (log["text"], log["status"], log["exit_code"]) == ("hello a\n", "exited", 0)
    listing = client.get("/api/jobs/")
    if persona != "anonymous":
        assert len(listing.json()) == (1 if persona in ("owner", "admin") else 0)


@pytest.mark.parametrize(
    ("persona", "status"),
    [("anonymous", (401, 403)), ("owner", (202,)), ("other", (404,)), ("admin", (403,))],
)
def test_api_start_is_for_the_owner_only(finished, as_persona, persona, status):
    pending = finished.tasks.get(status=Task.Status.PENDING)
    response = as_persona(persona).post(
        f"/api/tasks/{pending.pk}/act/", {"action": "spawn"}, content_type="application/json"
    )
    assert response.status_code in status
    if persona == "owner":  # answered at once; the workers start it
        assert response.json()["status"] == "starting"
        assert response.json()["pending_action"] == "spawn"
    run_queued()
    pending.refresh_from_db()
    assert (pending.status == Task.Status.RUNNING or pending.status in Task.ENDED) == (
        persona == "owner"
    )
    if persona == "admin":
        assert "run as the owner" in response.json()["detail"]


@pytest.mark.parametrize(
    ("persona", "status", "stopped"),
    [
        ("anonymous", (401, 403), False),
        ("owner", (202,), True),
        ("other", (404,), False),
        ("admin", (202,), True),
    ],
)
def test_api_stop_is_for_the_owner_and_admins(runner, node, as_persona, persona, status, stopped):
    spec = TaskSpec(host=node, template="sleep 600")
    job = services.create_job(runner, name="long", specs=[spec])
    task = services.spawn_task(job.tasks.get(), runner)
    response = as_persona(persona).post(
        "/api/tasks/bulk/", {"action": "kill", "jobs": [job.pk]}, content_type="application/json"
    )
    if persona == "other":  # the bulk endpoint answers for what they can see: nothing
        assert response.status_code == 202 and response.json() == {"results": []}
    else:
        assert response.status_code in status
    task.refresh_from_db()
    assert task.status == ("stopping" if stopped else "running")  # answered before any host
    assert run_queued() == stopped
    # A refused stop changes nothing, so a short look suffices there; a granted one (sent
    # by the workers) is waited for.
    timeout = 10 if stopped else 2
    assert wait_for(lambda: services.sync_tasks([task]) or _ended(task), timeout=timeout) == stopped
    if not stopped:
        services.signal_task(task, runner, "kill")


@pytest.mark.parametrize(
    ("persona", "status"),
    [("anonymous", (401, 403)), ("owner", (204,)), ("other", (404,)), ("admin", (204,))],
)
def test_api_delete(finished, as_persona, persona, status):
    response = as_persona(persona).delete(f"/api/jobs/{finished.pk}/")
    assert response.status_code in status
    assert Job.objects.filter(pk=finished.pk).exists() == (204 not in status)


@pytest.mark.parametrize(
    ("persona", "status", "scheduled"),
    [
        ("anonymous", (401, 403), False),
        ("owner", (200,), True),
        ("other", (404,), False),
        ("admin", (403,), False),
    ],
)
def test_api_scheduled_start_is_for_the_owner_only(
    finished, as_persona, persona, status, scheduled
):
    # The workers start a scheduled task as its owner: an admin setting the time would
    # run someone else's command as them.
    pending = finished.tasks.get(status=Task.Status.PENDING)
    response = as_persona(persona).patch(
        f"/api/tasks/{pending.pk}/",
        {"scheduled_start": "2030-01-01T22:00:00Z"},
        content_type="application/json",
    )
    assert response.status_code in status
    pending.refresh_from_db()
    assert (pending.scheduled_start is not None) == scheduled
    if persona == "admin":
        assert "Only the job's owner may schedule a start" in response.json()["detail"]


def test_an_admin_may_clear_a_scheduled_start_and_schedule_a_stop(finished, as_persona):
    pending = finished.tasks.get(status=Task.Status.PENDING)
    Task.objects.filter(pk=pending.pk).update(scheduled_start="2030-01-01T22:00:00Z")
    response = as_persona("admin").patch(
        f"/api/tasks/{pending.pk}/",
        {"scheduled_start": None, "scheduled_stop": "2030-01-02T06:00:00Z"},
        content_type="application/json",
    )
    assert response.status_code == 200
    pending.refresh_from_db()
    assert pending.scheduled_start is None and pending.scheduled_stop.hour == 6


def test_in_the_admin_only_the_owner_edits_a_scheduled_start(finished, runner, admin_user, rf):
    from django.contrib.admin.sites import site

    task = finished.tasks.get(status=Task.Status.PENDING)
    task_admin = site._registry[Task]
    for user, editable in ((admin_user, False), (runner, True)):
        request = rf.get("/")
        request.user = user
        readonly = task_admin.get_readonly_fields(request, task)
        assert ("scheduled_start" not in readonly) == editable
        assert "scheduled_stop" not in readonly
