"""The queue page in a real browser: queue a job through the New job form, see it wait, see
the scheduler start it on a free GPU and end it, read why a job that cannot start waits,
cancel it, and get a form error for a broken template.

Real parts: Chromium, the test sshd with two hosts of two fake T4s each, GNU screen. The
workers are played by this test: it calls the scheduling round and the task status sync,
the same functions their django-q2 tasks run.
"""

import pytest

from jobs import services as job_services
from jobs.models import Task
from queueing import scheduler
from queueing.models import QueuedJob
from tests.queueing.conftest import (  # noqa: F401  (fixtures)
    fake_gpu_root,
    gpus,
    log_dir,
    real_nodes,
    runner,
    sshd,
    wait_for,
)

pytestmark = pytest.mark.django_db(transaction=True)


def queue_from_the_form(page, name, command, gpu_count=1):
    """The New job form, from the queue page's link, with its defaults (N GPUs on one host,
    as soon as they are free)."""
    page.click("text=Queue a job")
    page.fill("input[name=name]", name)
    page.fill("textarea[name=template]", command)
    page.fill("input[name=gpu_count]", str(gpu_count))
    page.click("button:has-text('Queue it')")
    page.wait_for_load_state()


def row(page, name):
    return page.locator("tr", has_text=name)


def test_a_queued_job_waits_then_runs_on_a_free_gpu(login, live_server, runner, real_nodes):  # noqa: F811
    page = login("owner", "pw-owner-1")
    page.goto(f"{live_server.url}/queue/")
    queue_from_the_form(page, "from the browser", "echo ran on $CUDA_VISIBLE_DEVICES")
    assert "1 job waiting in all" in page.inner_text("body")
    assert "not looked at yet" in row(page, "from the browser").inner_text()

    assert "1 started" in scheduler.dispatch()
    page.reload()
    running = row(page, "from the browser")
    assert "Running" in running.inner_text()
    running.locator("a").click()  # the run: the job page with its task
    assert "/jobs/" in page.url and "from the browser" in page.inner_text("h1")

    def ended():
        job_services.sync_tasks(list(Task.objects.select_related("host")))
        scheduler.dispatch()  # notices the run's end
        return QueuedJob.objects.get(name="from the browser").state == QueuedJob.State.FINISHED

    assert wait_for(ended, timeout=60, step=0.5)
    page.goto(f"{live_server.url}/queue/")
    assert "from the browser: finished" in page.inner_text("body")
    assert "None of your queued jobs is running." in page.inner_text("body")
    task = Task.objects.get(job__name="from the browser")
    assert (task.status, task.exit_code) == (Task.Status.EXITED, 0)


def test_a_job_that_cannot_start_says_why_and_is_cancelled(login, live_server, runner, real_nodes):  # noqa: F811
    page = login("owner", "pw-owner-1")
    page.goto(f"{live_server.url}/queue/")
    queue_from_the_form(page, "too big", "true", gpu_count=3)  # each host has 2 GPUs
    assert "0 started, 1 waiting" in scheduler.dispatch()
    page.reload()
    reasons = row(page, "too big").locator(".reasons li").all_inner_texts()
    assert reasons, "the page should say why the job waits"
    assert reasons == QueuedJob.objects.get(name="too big").reasons

    row(page, "too big").locator("button:has-text('Cancel')").click()
    page.wait_for_load_state()
    assert "You have no waiting jobs." in page.inner_text("body")
    assert "too big: cancelled" in page.inner_text("body")
    assert QueuedJob.objects.get(name="too big").state == QueuedJob.State.CANCELLED
    assert not Task.objects.exists()


def test_a_broken_template_is_named_and_nothing_is_queued(login, live_server, runner, real_nodes):  # noqa: F811
    page = login("owner", "pw-owner-1")
    page.goto(f"{live_server.url}/queue/")
    queue_from_the_form(page, "broken", "python train.py --lr {lr")
    alert = page.locator("[role=alert]").first.inner_text()  # the summary atop the form
    assert "The template is not valid: expected '}'" in alert
    under = page.locator(".mb-3:has(#id_template) .error").inner_text()  # and under the field
    assert under.startswith("The template is not valid: expected '}'")
    assert page.input_value("input[name=name]") == "broken"  # what was typed is kept
    assert not QueuedJob.objects.exists()
