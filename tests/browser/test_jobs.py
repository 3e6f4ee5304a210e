"""The jobs "done when": create a 2-host PyTorch job from the template in a few clicks, see
each exact command before it runs, start it, watch a log live, and see the exit code.

Real parts: Chromium, the test sshd (hosts 127.0.0.1 and 127.0.0.2), GNU screen, torch.
The workers' status sync is played by this test (it calls the same function they call).
"""

import re
import sys
from pathlib import Path

import pytest

from jobs import services
from jobs.models import Task
from tests.jobs.conftest import (  # noqa: F401  (fixtures)
    _fresh_job_connections,
    fake_gpu_root,
    log_dir,
    make_host,
    node,
    runner,
    sshd,
    wait_for,
)
from tests.realparts import require_torch

TRAIN = Path(__file__).resolve().parents[2] / "examples" / "pytorch_ddp" / "train.py"
TORCHRUN = Path(sys.executable).parent / "torchrun"


@pytest.mark.django_db(transaction=True)
def test_a_two_host_pytorch_job_from_the_template(login, live_server, runner, node, sshd):  # noqa: F811
    require_torch()
    master = make_host(sshd, "node-1", "127.0.0.1")
    page = login("owner", "pw-owner-1")
    page.goto(f"{live_server.url}/jobs/")
    page.click("text=New distributed training")
    page.fill("input[name=name]", "ddp from the page")
    page.select_option("select[name=kind]", "torchrun")
    page.select_option("select[name=hosts]", [str(master.pk), str(node.pk)])
    page.fill("input[name=launcher]", str(TORCHRUN))
    page.fill("textarea[name=command]", f"{TRAIN} --steps {{steps}}")
    page.fill("textarea[name=parameters]", "steps=20")
    page.fill("textarea[name=env]", "GLOO_SOCKET_IFNAME=lo\nOMP_NUM_THREADS=1")
    page.click("button:has-text('Create')")

    commands = page.locator("pre.command").all_inner_texts()
    assert len(commands) == 2
    for rank, command in enumerate(commands):
        assert (
            f"--nnodes=2 --node_rank={rank} --nproc_per_node=1 --master_addr=127.0.0.1" in command
        )
        assert command.endswith(f"{TRAIN} --steps 20")
    page.click("button[value=spawn]")
    assert page.locator("text=Attach:").count() == 2  # screen -x hints for both tasks

    tasks = list(Task.objects.filter(job__name="ddp from the page").order_by("pk"))
    page.locator(f"#task-{tasks[0].pk} >> text=view").click()

    # The page follows the log while the "workers" sync the status.
    def finished():
        services.sync_tasks([t for t in Task.objects.select_related("host") if t.is_active])
        return "exit 0" in page.inner_text("#status")

    assert wait_for(finished, timeout=180, step=1)
    assert "rank 0/2 finished" in page.inner_text("#log")
    assert re.search(r"rank 0/2 step 0 loss", page.inner_text("#log"))
    for task in tasks:
        task.refresh_from_db()
        assert (task.status, task.exit_code) == (Task.Status.EXITED, 0)
