"""No SSH in the request path: actions answered at once and carried out by the workers,
logs served from what the workers fetched, connections closed when idle.

The workers are played by ``tests.workers.run_queued`` (the queued tasks, run as a worker
runs them, outside any request) and ``sync_running`` (what follows each monitoring cycle).
"""

import getpass
import time

import pytest
from django.test import RequestFactory
from django.urls import reverse

from core.hostcalls import HostCallInRequest, serving_request
from core.models import Activity
from jobs import remote, services
from jobs.models import Task, TaskAction, TaskLog
from jobs.tasks import sync_running
from monitoring.connections import ConnectionPool
from monitoring.transport import LocalTransport, SSHTransport
from tests.workers import run_queued

from .conftest import wait_for
from .test_execution import TICKER, make_task


@pytest.fixture
def host_calls(monkeypatch):
    """Every command sent to a host, with the request path it was sent from (None: not in a
    request). Recorded before the transports' own guard, so a view reaching a host shows
    here even if that guard were gone."""
    calls = []
    for transport in (SSHTransport, LocalTransport):
        original = transport.run

        def run(self, argv, *args, _original=original, **kwargs):
            calls.append((serving_request.get(), argv[0]))
            return _original(self, argv, *args, **kwargs)

        monkeypatch.setattr(transport, "run", run)
    return calls


def from_requests(calls) -> list:
    return [call for call in calls if call[0] is not None]


def test_a_host_call_while_a_request_is_served_is_refused(rf: RequestFactory, node, runner):
    from core.hostcalls import NoHostCalls

    def view(request):
        return remote.run_as(node, getpass.getuser(), ["true"])

    with pytest.raises(HostCallInRequest, match="while serving /jobs/x"):
        NoHostCalls(view)(rf.get("/jobs/x"))
    assert remote.run_as(node, getpass.getuser(), ["true"]).ok  # outside a request: fine


def test_no_job_page_or_endpoint_reaches_a_host(client, runner, node, host_calls):
    """Every jobs URL, for a running, a pending and a finished task, and every action."""
    running = services.spawn_task(make_task(runner, node, "sleep 600"), runner)
    ended = services.spawn_task(make_task(runner, node, "echo done"), runner)
    pending = make_task(runner, node, "true")
    assert wait_for(lambda: sync_running() and Task.objects.get(pk=ended.pk).status == "exited")
    client.force_login(runner)
    gets = [reverse("job-list"), "/api/jobs/", "/api/tasks/"]
    for task in (running, ended, pending):
        gets += [
            reverse("job-detail", args=[task.job_id]),
            reverse("task-log", args=[task.pk]),
            reverse("task-log-download", args=[task.pk]),
            f"/api/jobs/{task.job_id}/",
            f"/api/tasks/{task.pk}/",
            f"/api/tasks/{task.pk}/log/",
            f"/api/tasks/{task.pk}/download/",
        ]
    for url in gets:
        assert client.get(url).status_code in (200, 302, 400), url
    act = {"content_type": "application/json"}
    posts = [
        (f"/api/tasks/{pending.pk}/act/", {"action": "spawn"}, act),
        (f"/api/tasks/{running.pk}/act/", {"action": "interrupt"}, act),
        ("/api/tasks/bulk/", {"action": "terminate", "tasks": [running.pk]}, act),
        (f"/api/jobs/{running.job_id}/act/", {"action": "kill"}, act),
        (reverse("job-action", args=[running.job_id]), {"action": "stop"}, {}),
        (reverse("jobs-action"), {"action": "kill", "jobs": [running.job_id]}, {}),
    ]
    for url, data, options in posts:
        assert client.post(url, data, **options).status_code in (202, 302), url
    assert host_calls and not from_requests(host_calls)  # the sync did; no request did
    assert run_queued() >= 3  # the actions are the workers' now
    assert wait_for(lambda: sync_running() and Task.objects.get(pk=running.pk).is_active is False)
    assert not from_requests(host_calls)


def test_a_start_is_answered_at_once_and_carried_out_by_the_workers(client, runner, node):
    task = make_task(runner, node, TICKER, ticks=3, code=4)
    client.force_login(runner)
    response = client.post(
        f"/api/tasks/{task.pk}/act/", {"action": "spawn"}, content_type="application/json"
    )
    assert response.status_code == 202
    assert (response.json()["status"], response.json()["pending_action"]) == ("starting", "spawn")
    states = client.get(f"/api/jobs/{task.job_id}/").json()["tasks"]
    assert (states[0]["status"], states[0]["pending_action"]) == ("starting", "spawn")
    assert run_queued() == 1
    task.refresh_from_db()
    assert task.status == Task.Status.RUNNING and task.pid
    order = TaskAction.objects.get(task=task)
    assert order.done_at and not order.error and order.requested_by == runner
    assert client.get(f"/api/tasks/{task.pk}/").json()["pending_action"] is None
    assert wait_for(lambda: sync_running() and Task.objects.get(pk=task.pk).exit_code == 4)


def test_a_start_the_host_refuses_fails_the_task_with_why(client, runner, node, admin_user):
    task = make_task(runner, node, "true")
    profile = runner.profile
    profile.unix_username = "no-such-account"  # the host refuses this login
    profile.save()
    client.force_login(runner)
    response = client.post(reverse("job-action", args=[task.job_id]), {"action": "spawn"})
    assert response.status_code == 302
    task.refresh_from_db()
    assert task.status == Task.Status.STARTING
    run_queued()
    task.refresh_from_db()
    assert task.status == Task.Status.FAILED and "authentication as 'no-such-account'" in task.error
    order = TaskAction.objects.get(task=task)
    assert order.done_at and f"Task {task.pk} could not start" in order.error
    assert "could not start" in Activity.objects.get(name="jobs-actions").last_error
    page = client.get(reverse("job-detail", args=[task.job_id])).content.decode()
    assert "no-such-account" in page  # the owner sees why on the job's page
    client.force_login(admin_user)
    admin_page = client.get(f"/admin/jobs/task/{task.pk}/change/").content.decode()
    assert f"Task {task.pk} could not start" in admin_page  # and admins, with the action


def test_a_signal_the_host_refuses_leaves_the_task_running_and_says_why(client, runner, node):
    task = services.spawn_task(make_task(runner, node, "sleep 600"), runner)
    Task.objects.filter(pk=task.pk).update(unix_username="no-such-account")
    client.force_login(runner)
    response = client.post(
        f"/api/tasks/{task.pk}/act/", {"action": "terminate"}, content_type="application/json"
    )
    assert response.status_code == 202 and response.json()["status"] == "stopping"
    run_queued()
    task.refresh_from_db()
    assert task.status == Task.Status.RUNNING and task.stop_requested_at is None
    assert task.error.startswith("terminate (SIGTERM) failed: ")
    Task.objects.filter(pk=task.pk).update(unix_username=getpass.getuser())
    task.refresh_from_db()
    services.signal_task(task, runner, "kill")


def test_refusals_answer_at_once_and_change_nothing(client, runner, node, other_user):
    task = make_task(runner, node, "true")
    client.force_login(other_user)
    url = f"/api/tasks/{task.pk}/act/"
    assert client.post(url, {"action": "spawn"}, content_type="application/json").status_code == 404
    client.force_login(runner)
    stop = client.post(url, {"action": "kill"}, content_type="application/json")
    assert stop.status_code == 400 and "nothing to stop" in stop.json()["detail"]
    assert not TaskAction.objects.exists() and run_queued() == 0
    task.refresh_from_db()
    assert task.status == Task.Status.PENDING


def test_a_start_that_waited_past_its_timeout_is_not_run_twice(runner, node, settings):
    """A claim settled by the sync (its worker never came) is not started afterwards."""
    from jobs import actions

    task = make_task(runner, node, "true")
    actions.request(task, runner, "spawn")
    settings.JOBS_START_TIMEOUT = 0
    time.sleep(0.01)
    assert "retried" in sync_running()  # nothing on the host: back to pending
    run_queued()
    task.refresh_from_db()
    assert task.status == Task.Status.PENDING and not task.pid
    assert "no longer waiting to start" in TaskAction.objects.get(task=task).error


def test_logs_are_kept_bounded_and_served_from_the_database(client, runner, node, settings):
    settings.JOBS_LOG_KEEP_BYTES = 1000
    settings.JOBS_LOG_FETCH_BYTES = 700
    script = "seq -f 'line %04g' 0 499"  # 500 lines of 10 bytes
    task = services.spawn_task(make_task(runner, node, script), runner)
    assert wait_for(lambda: sync_running() and Task.objects.get(pk=task.pk).status == "exited")
    stored = TaskLog.objects.get(task=task)
    assert stored.start > 0 and len(stored.text) <= 700  # one fetch: the last 1000, cut to 700
    sync_running()  # the rest, within the next rounds
    stored.refresh_from_db()
    assert stored.complete and stored.end == 5000 and len(stored.text) == 1000
    client.force_login(runner)
    piece = client.get(f"/api/tasks/{task.pk}/log/?offset=0").json()
    assert piece["offset"] == 4000 and piece["size"] == 5000
    assert piece["text"].startswith("line 0400\n") and piece["text"].endswith("line 0499\n")
    download = client.get(f"/api/tasks/{task.pk}/download/").content.decode()
    assert download.startswith("[the first 4000 bytes are not kept by the service;")
    assert download.endswith("line 0499\n")


def test_idle_connections_are_closed(settings, node, sshd):
    from tests.monitoring.conftest import make_host

    settings.SSH_IDLE_SECONDS = 0.3
    other = make_host(sshd, "node-3", "127.0.0.3")
    connections = ConnectionPool()
    connections.run(node, ["true"])
    transport = connections._entries[node.pk].transport
    assert transport._client is not None
    time.sleep(0.4)
    connections.run(other, ["true"])  # any use closes what has been idle
    assert len(connections) == 1 and transport._client is None
    connections.close()


def test_job_pools_of_idle_accounts_go(settings, node, runner):
    settings.SSH_IDLE_SECONDS = 0.3
    remote.run_as(node, getpass.getuser(), ["true"])
    time.sleep(0.4)
    remote.run_as(node, getpass.getuser(), ["true"])
    assert list(remote._pools) == [getpass.getuser()]
    remote._pools.setdefault("someone-idle", ConnectionPool())
    remote.run_as(node, getpass.getuser(), ["true"])
    assert "someone-idle" not in remote._pools


def test_an_action_handed_out_again_after_its_worker_died_is_not_done_twice(runner, node, settings):
    from django.utils import timezone

    from jobs import actions

    task = make_task(runner, node, "true")
    actions.request(task, runner, "spawn")
    order = TaskAction.objects.get(task=task)
    # The worker that took it died after marking it begun (django-q2 hands it out again).
    TaskAction.objects.filter(pk=order.pk).update(begun_at=timezone.now())
    run_queued()
    order.refresh_from_db()
    assert order.done_at and "the worker carrying it out stopped" in order.error
    task.refresh_from_db()
    assert task.status == Task.Status.STARTING and not task.pid  # not started a second time
    settings.JOBS_START_TIMEOUT = 0
    time.sleep(0.01)
    assert "retried" in sync_running()  # the sync settles it from what the host shows
