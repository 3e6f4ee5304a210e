"""Every request bounded and checked before the database (issue 20): body size, JSON depth,
NUL anywhere in stored text (keys included), repeated or too many ids, tasks per job, grids
counted without building them, literal values, names anchored at the end.

Each case failed before the fix (a 500, a stall, or a wrong or silent change); each answer
has the API's error shape and changes nothing. Run on both databases (PROFILE_PATHS).
"""

import json

import pytest
from django.test import override_settings

from accesscontrol.services import ensure_default_group, profile_for
from jobs import templating
from jobs.models import Job, Task
from monitoring.models import Device, Host
from queueing.models import QueuedJob
from reservations.models import Reservation

from .conftest import tomorrow


def post(client, url, body, **extra):
    data = body if isinstance(body, str | bytes) else json.dumps(body)
    return client.post(url, data, content_type="application/json", **extra)


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.fixture
def node(db):
    host = Host.objects.create(name="node-1", address="10.0.0.1", status=Host.Status.UP)
    for i in range(2):
        Device.objects.create(host=host, index=i, uuid=f"GPU-{i}")
    return host


@pytest.fixture
def runner(owner):
    profile = profile_for(owner)
    profile.unix_username = "owner"
    profile.save()
    ensure_default_group()
    return owner


def booking(devices, **change):
    return {
        "title": "train",
        "devices": devices,
        "start": tomorrow(9).isoformat(),
        "end": tomorrow(12).isoformat(),
        **change,
    }


# --- depth and size ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url", ["/api/tokens/login/", "/api/reservations/", "/api/jobs/", "/api/jobs/preview/"]
)
def test_it_refuses_deep_json_anywhere_even_anonymously(client, url, db):
    response = post(client, url, '{"name": ' + nested(100_000) + "}")
    assert response.status_code == 400
    assert response.json()["detail"] == "The JSON body nests deeper than 32 levels."


def test_brackets_inside_strings_are_text_not_depth(client, runner, node):
    client.force_login(runner)
    title = "[" * 500 + '\\"{'
    response = post(client, "/api/reservations/", booking([node.devices.first().pk], title=title))
    assert response.status_code == 400  # the title is too long, not too deep
    assert "title" in response.json() and "nests" not in response.json()["detail"]


@override_settings(REQUEST_MAX_BODY_BYTES=1000)
def test_it_refuses_a_large_body_with_413(client, runner, node):
    client.force_login(runner)
    response = post(client, "/api/reservations/", booking([1], description="x" * 2000))
    assert response.status_code == 413
    assert response.json() == {
        "detail": "The request body is too large: at most 1000 bytes are accepted."
    }
    assert not Reservation.objects.exists()


# --- NUL --------------------------------------------------------------------------------------


def test_nul_in_a_parameter_name_is_refused(client, runner, node):
    client.force_login(runner)
    body = {
        "name": "j",
        "template": "run",
        "tasks": [{"host": node.pk, "parameters": {"a\0": "1"}}],
    }
    response = post(client, "/api/jobs/", body)
    assert response.status_code == 400 and "NUL" in response.json()["detail"]
    assert not Job.objects.exists() and not Task.objects.exists()


def test_nul_in_a_queued_job_env_name_is_refused(client, runner, node):
    client.force_login(runner)
    body = {"name": "q", "tasks": [{"template": "run", "env": {"\0X": "1"}}]}
    response = post(client, "/api/queued-jobs/", body)
    assert response.status_code == 400 and "NUL" in response.json()["detail"]
    assert not QueuedJob.objects.exists()


def test_nul_in_a_booking_title_is_refused(client, runner, node):
    client.force_login(runner)
    response = post(client, "/api/reservations/", booking([node.devices.first().pk], title="a\0b"))
    assert response.status_code == 400 and "NUL" in response.json()["detail"]
    assert not Reservation.objects.exists()


def test_an_escaped_backslash_before_u0000_is_no_nul(client, runner, node):
    client.force_login(runner)
    body = {
        "name": "j",
        "template": "run {a}",
        "tasks": [{"host": node.pk, "parameters": {"a": "\\u0000"}}],
    }
    response = post(client, "/api/jobs/", body)
    assert response.status_code == 201, response.json()
    assert Task.objects.get().parameters == {"a": "\\u0000"}


# --- ids --------------------------------------------------------------------------------------


def test_a_gpu_listed_twice_in_a_booking_is_refused_by_name(client, runner, node):
    client.force_login(runner)
    gpu = node.devices.first().pk
    response = post(client, "/api/reservations/", booking([gpu, 2, gpu]))
    assert response.status_code == 400
    assert response.json()["devices"] == [f"Each id may be listed once; repeated: {gpu}."]
    response = post(client, "/api/reservations/", booking([gpu] * 5000))
    assert response.status_code == 400
    assert response.json()["devices"] == ["At most 1000 ids in one list (5000 given)."]
    assert not Reservation.objects.exists()


@override_settings(API_MAX_IDS=3)
def test_too_many_ids_are_refused(client, runner, node):
    client.force_login(runner)
    response = post(client, "/api/reservations/", booking([1, 2, 3, 4]))
    assert response.status_code == 400
    assert "At most 3 ids in one list (4 given)." in response.json()["detail"]
    response = post(client, "/api/tasks/bulk/", {"action": "kill", "tasks": [1, 2, 3, 4]})
    assert response.status_code == 400 and "At most 3 ids" in response.json()["detail"]


@override_settings(JOBS_MAX_TASKS=2)
def test_the_service_caps_tasks_for_pages_and_commands_too(runner, node):
    from django.core.exceptions import ValidationError

    from jobs.services import TaskSpec, create_job

    with pytest.raises(ValidationError, match="A job has at most 2 tasks."):
        create_job(runner, name="x", specs=[TaskSpec(host=node, template="true")] * 3)
    assert not Job.objects.exists()


def test_an_unknown_gpu_is_named(client, runner, node):
    client.force_login(runner)
    response = post(client, "/api/reservations/", booking([node.devices.first().pk, 999]))
    assert response.status_code == 400
    assert response.json()["devices"] == ['Invalid pk "999" - object does not exist.']


# --- tasks per job and grids ------------------------------------------------------------------


def test_a_job_with_more_tasks_than_allowed_is_refused(client, runner, node, settings):
    client.force_login(runner)
    rows = [{"host": node.pk}] * (settings.JOBS_MAX_TASKS + 1)
    response = post(client, "/api/jobs/", {"name": "big", "template": "true", "tasks": rows})
    assert response.status_code == 400
    assert f"no more than {settings.JOBS_MAX_TASKS} elements" in response.json()["detail"]
    assert not Job.objects.exists()


def grid_of(node, **change):
    values = {f"p{i}": [str(v) for v in range(10)] for i in range(8)}  # 10^8 combinations
    return {"name": "g", "template": "run {p0} {p7}", "host": node.pk, "values": values, **change}


def test_a_huge_grid_is_sampled_without_building_it(client, runner, node):
    client.force_login(runner)
    response = post(client, "/api/jobs/grid/", grid_of(node, samples=2, seed=5))
    assert response.status_code == 201
    assert len(response.json()["tasks"]) == 2


def test_a_huge_grid_without_samples_is_refused(client, runner, node, settings):
    client.force_login(runner)
    response = post(client, "/api/jobs/grid/", grid_of(node))
    assert response.status_code == 400
    limit = settings.JOBS_MAX_TASKS
    assert response.json()["detail"] == (
        f"The grid makes 100000000 tasks; at most {limit} are allowed in one job "
        "(ask for fewer with samples)."
    )
    assert not Job.objects.exists()


def test_sampling_by_position_draws_what_sampling_the_full_list_drew():
    import itertools
    import random

    values = {"a": list(range(7)), "b": list("xyz"), "c": [True, False]}
    combos = [dict(zip(values, c, strict=True)) for c in itertools.product(*values.values())]
    for seed in range(20):
        expected = random.Random(seed).sample(combos, 5)
        assert templating.grid(values, samples=5, seed=seed) == expected
    assert templating.grid(values) == combos


# --- literal values, anchored names -----------------------------------------------------------


def test_parameter_and_env_values_stay_literal(client, runner, node):
    client.force_login(runner)
    row = {"host": node.pk, "parameters": {"a": " x \n"}, "env": {"E": "\tv "}}
    response = post(client, "/api/jobs/", {"name": "lit", "template": "run {a}", "tasks": [row]})
    assert response.status_code == 201
    task = Task.objects.get()
    assert task.parameters == {"a": " x \n"} and task.env == {"E": "\tv "}
    assert task.command == "run ' x \n'"


@pytest.mark.parametrize("where", ["env", "parameters"])
def test_a_name_with_a_trailing_newline_is_refused(client, runner, node, where):
    client.force_login(runner)
    row = {"host": node.pk, where: {"NAME\n": "1"}}
    response = post(client, "/api/jobs/", {"name": "n", "template": "run", "tasks": [row]})
    assert response.status_code == 400, response.json()
    assert not Job.objects.exists()


def test_a_host_address_with_a_trailing_newline_is_refused():
    from django.core.exceptions import ValidationError

    from monitoring.models import address_validator, username_validator

    for validator, value in ((address_validator, "node-1\n"), (username_validator, "alice\n")):
        with pytest.raises(ValidationError):
            validator(value)
