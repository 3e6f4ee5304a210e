"""The jobs admin: its list filters by a task's status, and its action stops the selected
jobs' running tasks through the workers, as the pages do (the admin never reaches a host)."""

import pytest
from django.utils import timezone

from jobs.models import Job, Task, TaskAction
from monitoring.models import Host

pytestmark = pytest.mark.django_db

JOBS, TASKS = "/admin/jobs/job/", "/admin/jobs/task/"


@pytest.fixture
def jobs(owner):
    host = Host.objects.create(name="node-1", address="10.0.0.1")
    made = {}
    for name, status, pid in (("running", Task.Status.RUNNING, 4242), ("done", "exited", None)):
        job = Job.objects.create(owner=owner, name=name, template="true")
        made[name] = Task.objects.create(
            job=job, host=host, template="true", command="true", status=status, pid=pid,
            unix_username="owner", started_at=timezone.now(),
        )  # fmt: skip
    return made


def test_the_list_filters_jobs_by_a_task_status(client, admin_user, jobs):
    client.force_login(admin_user)
    page = client.get(JOBS, {"tasks__status__exact": "running"}).content.decode()
    assert ">running</a>" in page and ">done</a>" not in page


def test_the_action_hands_the_stop_of_running_tasks_to_the_workers(client, admin_user, jobs):
    client.force_login(admin_user)
    selected = [jobs["running"].job_id, jobs["done"].job_id]
    response = client.post(
        JOBS, {"action": "stop_tasks", "_selected_action": selected}, follow=True
    )
    assert "Stop asked for 1 running task(s)" in response.content.decode()
    jobs["running"].refresh_from_db()
    assert jobs["running"].status == Task.Status.STOPPING
    order = TaskAction.objects.get()
    assert (order.task, order.action, order.requested_by) == (jobs["running"], "stop", admin_user)


def test_the_task_list_stops_the_selected_tasks(client, admin_user, jobs):
    client.force_login(admin_user)
    client.post(TASKS, {"action": "stop_tasks", "_selected_action": [jobs["running"].pk]})
    jobs["running"].refresh_from_db()
    assert jobs["running"].status == Task.Status.STOPPING


def test_the_owner_does_not_reach_the_admin(client, owner, jobs):
    client.force_login(owner)
    response = client.post(
        JOBS, {"action": "stop_tasks", "_selected_action": [jobs["running"].job_id]}
    )
    assert response.status_code == 302 and "/admin/login/" in response.url
    assert not TaskAction.objects.exists()
