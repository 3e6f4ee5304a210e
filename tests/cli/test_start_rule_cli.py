"""The CLI asks the server where work may start: `hive status --free` and `hive submit` follow
the start rule (grants, bookings, busy GPUs...), and `--gpus node:i,j` names GPUs."""

import json

import pytest
from django.contrib.auth.models import Group

from accesscontrol.models import Grant
from accesscontrol.services import ensure_default_group
from jobs.models import Job, Task
from tests.queueing.conftest import Lab
from tests.queueing.test_start_rule import CASES, Case

from .test_jobs_cli import _own_screen_sessions, submitted_task  # noqa: F401  (autouse)


@pytest.fixture(params=list(CASES), ids=list(CASES))
def case(request, transactional_db, owner, other_user):
    ensure_default_group()
    steps, expected = CASES[request.param]
    case = Case(Lab(), owner, other_user)
    for step in steps:
        step(case)
    case.expected = expected
    return case


def test_status_free_agrees_with_the_start_rule(case, hive, signed_in):
    signed_in(case.owner)
    result = hive("status", "--free", "--json")
    assert result.exit_code == 0, result.output
    assert (case.gpu.pk in {g["id"] for g in json.loads(result.output)}) == (not case.expected)
    every = {g["id"]: g for g in json.loads(hive("status", "--json").output)}
    if "gpu_lost" not in case.expected:  # a lost GPU is listed, not free, with no reasons
        assert {r["code"] for r in every[case.gpu.pk]["reasons"]} == case.expected


@pytest.fixture
def only_gpu_1(runner, gpu_node):
    """The runner may use node-2:1 only (not the group's everything)."""
    Group.objects.get(name="everyone").user_set.remove(runner)
    grant = Grant.objects.create(name="gpu 1", scope=Grant.Scope.DEVICES)
    grant.users.add(runner)
    grant.devices.add(gpu_node.devices.get(index=1))
    return gpu_node


def test_submit_honours_grants_and_names_gpus(hive, signed_in, runner, only_gpu_1, workers):
    signed_in(runner)
    free = json.loads(hive("status", "--free", "--json").output)
    assert [g["name"] for g in free] == ["node-2:1"]

    result = hive("submit", "--gpus", "1", "--", "true")  # GPU 0 is free, but not for us
    assert result.exit_code == 0, result.output
    assert "on node-2 (node-2:1)" in result.output
    first = submitted_task(result.output)
    assert [d.index for d in first.devices.all()] == [1]
    assert hive("logs", "-f", str(first.pk)).exit_code == 0

    refused = hive("submit", "--gpus", "node-2:0", "--", "true")
    assert refused.exit_code == 1
    assert "These GPUs cannot be used now: owner is not allowed on node-2:0" in refused.output
    assert Job.objects.count() == 1  # the refused one left nothing

    named = hive("submit", "--gpus", "node-2:1", "--", "sh", "-c", "exit 7")
    assert named.exit_code == 0, named.output
    task = submitted_task(named.output)
    assert [d.index for d in task.devices.all()] == [1]
    followed = hive("logs", "-f", str(task.pk))
    assert followed.exit_code == 7 and f"Task {task.pk} exited 7." in followed.stderr


def test_logs_follow_exits_1_for_a_stopped_task(hive, signed_in, runner, gpu_node, workers):
    signed_in(runner)
    task = submitted_task(
        hive("submit", "-g", "0", "--host", "node-2", "--", "sleep", "300").output
    )
    assert hive("stop", "--kill", str(task.job_id)).exit_code == 0
    followed = hive("logs", "-f", str(task.pk))
    assert followed.exit_code == 1
    assert f"Task {task.pk} stopped" in followed.stderr
    assert Task.objects.get(pk=task.pk).status == Task.Status.KILLED


def test_submit_gpus_refuses_what_is_not_a_count_or_gpu_names(hive, signed_in, runner, gpu_node):
    signed_in(runner)
    result = hive("submit", "--gpus", "node-2:x", "--", "true")
    assert result.exit_code == 1 and "GPU indexes are numbers" in result.output
    result = hive("submit", "--gpus", "node-2:5", "--", "true")
    assert result.exit_code == 1 and "node-2 has no GPU 5 (it has 0, 1)." in result.output
    assert not Job.objects.exists()


def test_every_command_documents_its_exit_status():
    from click.testing import CliRunner
    from hive_cli.main import cli

    for name in [None, *cli.commands]:
        result = CliRunner().invoke(cli, [name, "--help"] if name else ["--help"])
        assert result.exit_code == 0 and "Exit status" in result.output, name
