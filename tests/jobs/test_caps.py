"""Per-user caps on unfinished job tasks and waiting queue tasks: one person's thousands of
tasks slowed every sync and start for everybody (6 jobs of 500 tasks made a bystander wait
16 s). A refusal names the cap, creates nothing, and leaves other users alone."""

import pytest
from django.contrib.auth import get_user_model

from jobs.models import Job, Task
from queueing.models import QueuedJob
from tests.queueing.conftest import map_to_own_name


def grid(client, node, count):
    body = {"name": "g", "template": "run {x}", "host": node.pk,
            "values": {"x": [str(i) for i in range(count)]}}  # fmt: skip
    return client.post("/api/jobs/grid/", body, content_type="application/json")


@pytest.fixture
def bystander(db, node):
    user = get_user_model().objects.create_user("bystander", password="pw-bystander-1")
    map_to_own_name(user)
    return user


def test_unfinished_job_tasks_are_capped_per_user(client, runner, bystander, node, settings):
    settings.JOBS_MAX_UNFINISHED_TASKS_PER_USER = 5
    client.force_login(runner)
    assert grid(client, node, 3).status_code == 201
    refused = grid(client, node, 3)
    assert refused.status_code == 400
    detail = refused.json()["detail"]
    assert "at most 5" in detail and "unfinished job tasks" in detail
    assert Task.objects.filter(job__owner=runner).count() == 3  # nothing half-made
    client.force_login(bystander)
    assert grid(client, node, 5).status_code == 201  # someone else's tasks don't count
    Task.objects.filter(job__owner=runner).update(status=Task.Status.EXITED, exit_code=0)
    client.force_login(runner)
    assert grid(client, node, 5).status_code == 201  # ended tasks don't count either
    assert Job.objects.filter(owner=runner).count() == 2


QUEUE_BODY = {"name": "q", "tasks": [{"template": "true", "gpu_count": 1}] * 3}


def enqueue(client):
    return client.post("/api/queued-jobs/", QUEUE_BODY, content_type="application/json")


def test_waiting_queue_tasks_are_capped_per_user(client, runner, bystander, settings):
    settings.QUEUE_MAX_WAITING_TASKS_PER_USER = 4
    client.force_login(runner)
    first = enqueue(client)
    assert first.status_code == 201, first.json()
    refused = enqueue(client)
    assert refused.status_code == 400
    assert "at most 4" in refused.json()["detail"]
    assert "waiting queue tasks" in refused.json()["detail"]
    assert QueuedJob.objects.filter(owner=runner).count() == 1
    client.force_login(bystander)
    assert enqueue(client).status_code == 201
