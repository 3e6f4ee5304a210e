"""Creating jobs from the pages and the API: task rows, grids, distributed templates; bad
input gets a specific error and creates nothing."""

import json
import re
import shlex

import pytest
from django.core.exceptions import ValidationError
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from jobs import services, templating
from jobs.models import Job, Task
from jobs.services import TaskSpec
from tests.workers import Workers


def test_a_full_grid_has_one_task_per_combination():
    combos = templating.grid({"lr": ["0.1", "0.01"], "bs": ["32", "64", "128"]})
    assert len(combos) == 6 and {"lr": "0.01", "bs": "128"} in combos


def test_random_samples_are_distinct_and_repeat_with_the_seed():
    values = {"a": list(range(10)), "b": list(range(10))}
    first = templating.grid(values, samples=7, seed=42)
    assert len({json.dumps(c) for c in first}) == 7
    assert templating.grid(values, samples=7, seed=42) == first
    assert templating.grid(values, samples=7, seed=43) != first
    assert len(templating.grid(values, samples=500, seed=1)) == 100


def test_value_lists_are_parsed_from_lines():
    assert templating.parse_value_lists("lr: 0.1, 0.01\nbs = 32\n\n") == {
        "lr": ["0.1", "0.01"],
        "bs": ["32"],
    }


def test_the_form_creates_tasks_from_rows(client, runner, node):
    client.force_login(runner)
    gpu = node.devices.get(index=1)
    data = {
        "name": "rows",
        "template": "python train.py --lr {lr}",
        "env": "SEED=1",
        "rows-TOTAL_FORMS": "3",
        "rows-INITIAL_FORMS": "0",
        "rows-0-host": node.pk,
        "rows-0-devices": [gpu.pk],
        "rows-0-parameters": "lr=0.1",
        "rows-1-host": node.pk,
        "rows-1-parameters": "lr=$(reboot)",
        "rows-1-env": "SEED=2",
    }
    response = client.post(reverse("job-rows"), data)
    job = Job.objects.get(name="rows")
    assert response.status_code == 302 and response.url == reverse("job-detail", args=[job.pk])
    first, second = job.tasks.order_by("pk")
    assert first.command == "python train.py --lr 0.1" and list(first.devices.all()) == [gpu]
    assert shlex.split(second.command)[-1] == "$(reboot)" and second.env == {"SEED": "2"}
    page = client.get(response.url).content.decode()
    assert "CUDA_VISIBLE_DEVICES=GPU-1-uuid SEED=1 python train.py --lr 0.1" in page
    assert "python train.py --lr &#x27;$(reboot)&#x27;" in page


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"template": "run {lr!r}"}, "not a field"),
        ({"rows-0-parameters": "no equals sign"}, "write name=value"),
        ({"rows-0-parameters": ""}, "No value for {lr}"),
        ({"env": "BAD-NAME=1"}, "not a valid environment variable name"),
        ({"rows-0-host": ""}, "at least one task"),
    ],
)
def test_bad_form_input_says_why_and_creates_nothing(client, runner, node, change, message):
    client.force_login(runner)
    data = {
        "name": "bad",
        "template": "run {lr}",
        "rows-TOTAL_FORMS": "1",
        "rows-INITIAL_FORMS": "0",
        "rows-0-host": node.pk,
        "rows-0-parameters": "lr=1",
        **change,
    }
    response = client.post(reverse("job-rows"), data)
    assert response.status_code == 400
    assert message in response.content.decode().replace("&#x27;", "'")
    assert not Job.objects.exists() and not Task.objects.exists()


def test_a_gpu_of_another_host_is_refused(client, runner, node, sshd):
    from tests.monitoring.conftest import make_host

    other = make_host(sshd, "node-3", "127.0.0.3")
    client.force_login(runner)
    response = client.post(
        "/api/jobs/",
        {
            "name": "x",
            "template": "true",
            "tasks": [{"host": other.pk, "devices": [node.devices.first().pk]}],
        },
        content_type="application/json",
    )
    assert response.status_code == 400 and "is not on host node-3" in response.json()["detail"]
    assert not Job.objects.exists()


def test_the_guided_form_creates_a_sampled_grid(client, runner, node):
    client.force_login(runner)
    data = {
        "name": "grid",
        "template": "train --lr {lr} --bs {bs}",
        "where": "devices",
        "host": node.pk,
        "gpu_count": "1",
        "values": "lr: 0.1, 0.01, 0.001\nbs: 32, 64",
        "samples": "4",
        "seed": "7",
        "when": "hand",
    }
    assert client.post(reverse("job-new"), data).status_code == 302
    commands = list(Job.objects.get(name="grid").tasks.values_list("command", flat=True))
    assert len(commands) == 4 and len(set(commands)) == 4
    expected = [
        f"train --lr {c['lr']} --bs {c['bs']}"
        for c in templating.grid(
            {"lr": ["0.1", "0.01", "0.001"], "bs": ["32", "64"]}, samples=4, seed=7
        )
    ]
    assert commands == expected


def test_the_api_creates_a_grid_and_refuses_an_empty_list(client, runner, node):
    client.force_login(runner)
    body = {"name": "g", "template": "run {x}", "host": node.pk, "values": {"x": ["1", "2; id"]}}
    response = client.post("/api/jobs/grid/", body, content_type="application/json")
    assert response.status_code == 201
    assert [t["command"] for t in response.json()["tasks"]] == ["run 1", "run '2; id'"]
    body["values"] = {"x": []}
    response = client.post("/api/jobs/grid/", body, content_type="application/json")
    assert response.status_code == 400 and "non-empty list" in response.json()["detail"]
    assert Job.objects.count() == 1


@pytest.mark.django_db(transaction=True)  # the workers' thread sees the test's rows
def test_the_distributed_page_shows_each_rank_before_it_runs(client, runner, node, sshd):
    """The free port comes from the host, asked by a worker while the request waits."""
    from tests.monitoring.conftest import make_host

    master = make_host(sshd, "node-1", "127.0.0.1")
    client.force_login(runner)
    data = {
        "name": "ddp",
        "kind": "torchrun",
        "hosts": [master.pk, node.pk],
        "launcher": "torchrun",
        "nproc_per_node": "2",
        "command": "train.py --epochs {epochs}",
        "parameters": "epochs=3",
    }
    with Workers():
        response = client.post(reverse("job-distributed"), data)
    assert response.status_code == 302
    page = client.get(response.url).content.decode()
    port = re.search(r"--master_port=(\d+)", page)[1]
    assert 1024 <= int(port) <= 65535
    for rank in (0, 1):
        assert f"--nnodes=2 --node_rank={rank} --nproc_per_node=2 --master_addr=127.0.0.1" in page
    assert "train.py --epochs 3" in page


def test_without_workers_a_distributed_job_is_refused_in_bounded_time(
    client, runner, node, settings
):
    settings.WORKER_ANSWER_SECONDS = 0.3
    client.force_login(runner)
    body = {"name": "ddp", "kind": "pytorch-env", "nodes": [{"host": node.pk}], "command": "x"}
    response = client.post("/api/jobs/distributed/", body, content_type="application/json")
    assert response.status_code == 400
    assert (
        "Could not pick a free port: the background workers did not answer within 0.3 s"
        in (response.json()["detail"])
    )
    assert not Job.objects.exists()


def test_scheduling_a_pending_task_over_the_api(client, runner, node):
    client.force_login(runner)
    response = client.post(
        "/api/jobs/",
        {"name": "s", "template": "true", "tasks": [{"host": node.pk}]},
        content_type="application/json",
    )
    task_id = response.json()["tasks"][0]["id"]
    url = f"/api/tasks/{task_id}/"
    body = {
        "scheduled_start": "2030-01-01T22:00:00+00:00",
        "scheduled_stop": "2030-01-01T21:00:00+00:00",
    }
    bad = client.patch(url, body, content_type="application/json")
    assert bad.status_code == 400 and "after the start" in bad.json()["detail"]
    body["scheduled_stop"] = "2030-01-02T06:00:00+00:00"
    assert client.patch(url, body, content_type="application/json").status_code == 200
    assert Task.objects.get(pk=task_id).scheduled_start.hour == 22


def _queries(fn) -> int:
    with CaptureQueriesContext(connection) as queries:
        fn()
    return len(queries)


def test_pages_and_the_api_ask_as_many_queries_for_many_tasks_as_for_one(client, runner, node):
    """No query per task: the job's page, the job list and the API list cost the same for a
    job of one task as for one of five (each with its GPUs)."""
    client.force_login(runner)
    gpus = list(node.devices.all())

    def job_of(size):
        specs = [TaskSpec(host=node, template="true", devices=gpus) for _ in range(size)]
        return services.create_job(runner, name=f"size {size}", specs=specs)

    small, big = job_of(1), job_of(5)
    client.get(reverse("job-list"))  # the first request fills caches (session, permissions)
    for url in (reverse("job-detail", args=[small.pk]), f"/api/jobs/{small.pk}/"):
        big_url = url.replace(str(small.pk), str(big.pk))
        assert _queries(lambda u=url: client.get(u)) == _queries(lambda u=big_url: client.get(u))
    listed = _queries(lambda: client.get("/api/jobs/"))
    page = _queries(lambda: client.get(reverse("job-list")))
    job_of(5)
    assert _queries(lambda: client.get("/api/jobs/")) == listed
    assert _queries(lambda: client.get(reverse("job-list"))) == page


def test_a_task_added_to_a_job_is_checked_like_the_job_s_own(runner, node, sshd):
    from tests.monitoring.conftest import make_host

    job = services.create_job(runner, name="grows", specs=[TaskSpec(host=node, template="true")])
    task = services.add_task(job, TaskSpec(host=node, template="echo {x}", parameters={"x": "a b"}))
    assert task.job == job and task.command == "echo 'a b'" and job.tasks.count() == 2
    other = make_host(sshd, "node-3", "127.0.0.3")
    wrong = TaskSpec(host=other, template="true", devices=[node.devices.first()])
    with pytest.raises(ValidationError, match="is not on host node-3"):
        services.add_task(job, wrong)
    assert job.tasks.count() == 2


@pytest.mark.parametrize("value", ["²", "99999999999999999999", "1e3", "-1", "x"])
def test_odd_ids_and_offsets_name_nothing_instead_of_a_500(client, runner, node, value):
    client.force_login(runner)
    job = services.create_job(runner, name="p", specs=[TaskSpec(host=node, template="true")])
    task = job.tasks.get()
    for url, field in [
        (reverse("jobs-action"), "jobs"),
        (reverse("job-action", args=[job.pk]), "tasks"),
    ]:
        response = client.post(url, {"action": "spawn", field: [value]}, follow=True)
        assert response.status_code == 200 and "spawn: 0 of 0 tasks" in response.content.decode()
    task.refresh_from_db()
    assert task.status == Task.Status.PENDING
    api = client.get(f"/api/tasks/{task.pk}/log/", {"offset": value})
    assert api.status_code == 400  # a whole number: "it has no log yet"
    if not value.isascii() or not value.isdigit():
        assert "whole number" in api.json()["detail"]
