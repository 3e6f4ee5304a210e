"""A task that failed or was stopped can be run again: a new task of the same job, the old
one kept as it ended (status, exit code, log), through the service, the page and the API."""

import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from jobs import services
from jobs.models import Task
from tests.workers import run_queued

from .conftest import wait_for
from .test_execution import make_task, synced


def ended(task) -> bool:
    return synced(task).status in Task.ENDED


def test_a_task_that_exited_with_an_error_runs_again_and_keeps_its_history(runner, node):
    task = services.spawn_task(make_task(runner, node, "echo first; exit 3"), runner)
    assert wait_for(lambda: ended(task)) and task.exit_code == 3
    assert task.job.status == "failed"

    again = services.rerun_task(task, runner)
    task.refresh_from_db()
    assert again.pk != task.pk and again.job_id == task.job_id
    assert task.rerun_as_id == again.pk and again.rerun_of == task
    assert again.command == task.command and again.log_path != task.log_path
    assert (task.status, task.exit_code) == (Task.Status.EXITED, 3)  # the old run as it ended
    assert wait_for(lambda: ended(again))
    assert task.job.status == "failed"  # the new run exited 3 too; only the latest counts

    with pytest.raises(ValidationError, match=f"it was run again as task {again.pk}"):
        services.rerun_task(task, runner)


def test_only_runs_that_did_not_succeed_are_run_again(runner, node):
    pending = make_task(runner, node, "true")
    with pytest.raises(ValidationError, match="is pending; only a failed or stopped task"):
        services.rerun_task(pending, runner)
    done = services.spawn_task(make_task(runner, node, "true"), runner)
    assert wait_for(lambda: ended(done)) and done.exit_code == 0
    with pytest.raises(ValidationError, match="is exited"):
        services.rerun_task(done, runner)
    assert Task.objects.count() == 2


def test_only_the_owner_runs_a_task_again(runner, node, other_user, admin_user):
    task = make_task(runner, node, "true")
    Task.objects.filter(pk=task.pk).update(status=Task.Status.FAILED, error="lost")
    task.refresh_from_db()
    for someone in (other_user, admin_user):
        with pytest.raises(PermissionDenied):
            services.rerun_task(task, someone)
    assert Task.objects.count() == 1


def test_a_refused_run_leaves_nothing_and_can_be_asked_again(runner, node, other_user):
    from accesscontrol.models import Ban

    task = make_task(runner, node, "true", devices=node.devices.all())
    Task.objects.filter(pk=task.pk).update(status=Task.Status.KILLED)
    task.refresh_from_db()
    ban = Ban.objects.create(user=runner, reason="misuse", created_by=other_user)
    with pytest.raises(ValidationError, match="owner is banned"):
        services.rerun_task(task, runner)
    task.refresh_from_db()
    assert task.rerun_as_id is None and Task.objects.count() == 1
    ban.delete()
    again = services.rerun_task(task, runner)
    assert again.status == Task.Status.RUNNING


def test_start_on_the_page_runs_failed_tasks_again(client, runner, node):
    task = make_task(runner, node, "true")
    Task.objects.filter(pk=task.pk).update(status=Task.Status.FAILED, error="lost")
    client.force_login(runner)
    response = client.post(f"/jobs/{task.job_id}/action", {"action": "spawn"}, follow=True)
    assert "spawn: 1 of 1 task it applies to, handed to" in response.content.decode()
    assert f"run again as task {Task.objects.get(pk=task.pk).rerun_as_id}" in (
        response.content.decode()
    )
    run_queued()  # the workers start the new run
    task.refresh_from_db()
    assert task.rerun_as is not None and task.rerun_as.status == Task.Status.RUNNING


def test_the_api_runs_a_failed_task_again(client, runner, node):
    task = make_task(runner, node, "true")
    Task.objects.filter(pk=task.pk).update(status=Task.Status.FAILED, error="lost")
    client.force_login(runner)
    answer = client.post(f"/api/jobs/{task.job_id}/act/", {"action": "spawn"}, "application/json")
    assert answer.status_code == 202, answer.json()
    new = Task.objects.get(pk=task.pk).rerun_as
    assert answer.json()["results"] == [{"task": new.pk, "status": "starting", "error": ""}]
    run_queued()  # the workers start the new run
    assert client.get(f"/api/tasks/{task.pk}/").json()["rerun_as"] == new.pk
    assert client.get(f"/api/jobs/{task.job_id}/").json()["status"] == "running"
