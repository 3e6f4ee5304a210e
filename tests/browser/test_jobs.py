"""The jobs "done when": create a 2-host PyTorch job from the template in a few clicks, see
each exact command before it runs, start it, watch a log live, and see the exit code.

Real parts: Chromium, the test sshd (hosts 127.0.0.1 and 127.0.0.2), GNU screen, torch.
The workers are played by a thread of this test (the queued free-port question and starts)
and by the test itself (the sync and log fetch after each cycle, the function they call).
"""

import re
import sys
from pathlib import Path

import pytest

from jobs.models import Task
from jobs.tasks import sync_running
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
from tests.workers import Workers

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
    with Workers():
        page.click("button:has-text('Create')")
        commands = page.locator("pre.command").all_inner_texts()
        _start_and_watch(page, commands)


def _start_and_watch(page, commands):
    assert len(commands) == 2
    for rank, command in enumerate(commands):
        assert (
            f"--nnodes=2 --node_rank={rank} --nproc_per_node=1 --master_addr=127.0.0.1" in command
        )
        assert command.endswith(f"{TRAIN} --steps 20")
    page.click("button[value=spawn]")
    assert page.locator("text=Attach:").count() == 2  # screen -x hints for both tasks
    tasks = list(Task.objects.filter(job__name="ddp from the page").order_by("pk"))
    # Answered at once; the page follows the tasks' states as the workers start them.
    for task in tasks:
        status = page.locator(f"#task-{task.pk} [data-role=status-text]")
        assert wait_for(
            lambda status=status: (
                "Running" in status.inner_text() or "Exited" in status.inner_text()
            ),
            timeout=60,
        )
    page.locator(f"#task-{tasks[0].pk} >> text=view").click()

    # The page follows the log while the "workers" sync the status.
    def finished():
        sync_running()
        return "exit 0" in page.inner_text("#status")

    assert wait_for(finished, timeout=180, step=1)
    # The end is recorded before the log's last part is fetched (the same sync, just after):
    # a poll between the two shows "exit 0" first, and the page polls on until the log is
    # complete.
    assert wait_for(lambda: "rank 0/2 finished" in page.inner_text("#log"), timeout=20)
    assert re.search(r"rank 0/2 step 0 loss", page.inner_text("#log"))

    # Rank 1, on the other host, may end a moment after rank 0, whose page is watched.
    def all_ended():
        sync_running()
        return all(t.status in Task.ENDED for t in Task.objects.filter(pk__in=ids))

    ids = [task.pk for task in tasks]
    assert wait_for(all_ended, timeout=60, step=1)
    for task in tasks:
        task.refresh_from_db()
        assert (task.status, task.exit_code) == (Task.Status.EXITED, 0)
