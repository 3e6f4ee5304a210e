"""Distributed templates end to end: the PyTorch DDP example as a 2-host job (127.0.0.1 and
127.0.0.2 of the test sshd), and the TF_CONFIG example."""

import json
import shlex
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ValidationError

from jobs import services
from jobs.distributed import Node, distributed_specs
from jobs.models import Task
from tests.monitoring.conftest import make_host
from tests.realparts import require_torch

from .conftest import wait_for

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
VENV_BIN = Path(sys.executable).parent
KEYS = ["MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE"]


@pytest.fixture
def two_nodes(node, sshd):
    return [Node(make_host(sshd, "node-1", "127.0.0.1")), Node(node)]


def run_job(owner, job, timeout=180):
    for task in job.tasks.all():
        services.spawn_task(task, owner)

    def all_ended():
        tasks = list(job.tasks.select_related("host"))
        services.sync_tasks([t for t in tasks if t.is_active])
        return all(t.status in Task.ENDED for t in job.tasks.all())

    if not wait_for(all_ended, timeout=timeout, step=1):
        tasks = list(job.tasks.select_related("host").order_by("pk"))
        for task in tasks:  # leave nothing running (a rank waiting for its peer would)
            if task.is_active:
                services.act(task, owner, "kill")
        pytest.fail(f"the job did not end within {timeout} s:\n" + "\n".join(map(report, tasks)))
    return list(job.tasks.order_by("pk"))


def report(task) -> str:
    """A task's state and the end of its log, for a failure message."""
    try:
        log = Path(task.log_path).read_text()[-3000:] if task.log_path else "(no log)"
    except OSError as exc:
        log = f"(log unreadable: {exc})"
    return f"--- #{task.pk} on {task.host}: {task.status}, pid {task.pid}\n{log}"


def test_the_pytorch_ddp_example_trains_on_two_hosts(runner, two_nodes):
    require_torch()  # requirements-examples.txt installs it (CPU), as CI does
    script = f"{EXAMPLES / 'pytorch_ddp' / 'train.py'} --steps {{steps}}"
    template, specs = distributed_specs(
        runner,
        "torchrun",
        two_nodes,
        script,
        parameters={"steps": 30},
        env={"GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1"},
        launcher=str(VENV_BIN / "torchrun"),
    )
    job = services.create_job(runner, name="ddp", specs=specs, template=template)
    first, second = job.tasks.order_by("pk")
    # What is shown is what runs: the rendered command, rank by rank.
    assert "--node_rank=0" in first.command and "--node_rank=1" in second.command
    assert "--master_addr=127.0.0.1" in second.command and "--nnodes=2" in first.command
    assert shlex.split(first.command)[0] == str(VENV_BIN / "torchrun")
    tasks = run_job(runner, job)
    logs = [Path(t.log_path).read_text() for t in tasks]
    for task, log in zip(tasks, logs, strict=True):
        assert task.status == Task.Status.EXITED and task.exit_code == 0, log
    assert "rank 0/2 finished" in logs[0] and "weights in sync: True" in logs[0]
    assert "rank 1/2 finished" in logs[1] and "weights in sync: True" in logs[1]


def test_the_pytorch_env_template_sets_rank_and_world_size(runner, two_nodes):
    keys = json.dumps(KEYS)  # double quotes: the template quotes the program in single ones
    show = f"{sys.executable} -c 'import os; print(*(os.environ[k] for k in {keys}))'"
    template, specs = distributed_specs(runner, "pytorch-env", two_nodes, show)
    tasks = run_job(runner, services.create_job(runner, name="env", specs=specs))
    port = tasks[0].env["MASTER_PORT"]
    assert port.isdigit() and tasks[1].env["MASTER_PORT"] == port
    lines = [Path(t.log_path).read_text().split() for t in tasks]
    assert lines == [["127.0.0.1", port, "0", "2"], ["127.0.0.1", port, "1", "2"]]


def test_the_tf_config_example_tells_each_worker_its_place(runner, two_nodes):
    command = f"{sys.executable} {EXAMPLES / 'tf_config' / 'worker.py'}"
    template, specs = distributed_specs(runner, "tensorflow", two_nodes, command)
    tasks = run_job(runner, services.create_job(runner, name="tf", specs=specs))
    configs = [json.loads(t.env["TF_CONFIG"]) for t in tasks]
    workers = configs[0]["cluster"]["worker"]
    assert [w.split(":")[0] for w in workers] == ["127.0.0.1", "127.0.0.2"]
    assert [c["task"] for c in configs] == [{"type": "worker", "index": i} for i in (0, 1)]
    for index, task in enumerate(tasks):
        log = Path(task.log_path).read_text()
        assert f"worker {index} of 2: listening on {workers[index]}" in log
        assert f"worker {index} finished" in log


def test_an_unknown_template_is_refused(runner, two_nodes):
    with pytest.raises(ValidationError, match="Unknown template"):
        distributed_specs(runner, "mpi", two_nodes, "true")
