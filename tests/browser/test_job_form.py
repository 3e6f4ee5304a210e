"""The guided New job form in a browser, from the empty form: each option shows its own
fields; the GPU picker shows the chosen host's GPUs with their live state and whether you
may start on each now; the preview lists the tasks as the server expands them before
anything is sent; and the form ends in a running task, in a queued run, or in pending tasks
on the ticked GPU.

Real parts: Chromium; for the runs, the test sshd with two hosts of two fake T4s each and
GNU screen. The workers are played by this test (tests.workers, the scheduling round and
the status sync: the functions their django-q2 tasks run)."""

from datetime import timedelta

import pytest
from django.utils import timezone

from accesscontrol.services import ensure_default_group
from accesscontrol.zones import user_zone
from core.templatetags.hive_time import absolute
from jobs import services as job_services
from jobs import templating
from jobs.models import Job, Task
from monitoring.models import Device
from queueing import scheduler
from queueing.models import QueuedJob
from reservations.services import create_reservation
from tests.monitoring.conftest import node  # noqa: F401  (node-1 up with a GPU; node-2)
from tests.queueing.conftest import (  # noqa: F401  (fixtures)
    fake_gpu_root,
    gpus,
    log_dir,
    real_nodes,
    runner,
    sshd,
    wait_for,
)
from tests.workers import Workers

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def lab(node, other_user):  # noqa: F811
    ensure_default_group()
    taken = Device.objects.create(host=node, index=1, uuid="GPU-2", name="Tesla T4")
    end = timezone.now() + timedelta(hours=2)
    create_reservation(other_user, title="t", devices=[taken], start=timezone.now(), end=end)
    return node, node.devices.get(index=0), taken


def tile(page, gpu):
    return page.locator(f'.gpu-pick[data-gpu="{gpu.pk}"]')


def field_errors(page, field_id):
    """The errors shown in the block of one field (under it)."""
    return page.locator(f".mb-3:has(#{field_id}) .error").all_inner_texts()


def test_the_options_show_their_own_fields(login, live_server, owner, lab):
    page = login("owner", "pw-owner-1")
    page.goto(f"{live_server.url}/jobs/new/")
    # The defaults: one GPU on any host, queued until it is free.
    assert page.is_checked("#id_where_0") and page.input_value("#id_gpu_count") == "1"
    assert page.is_checked("#id_when_0") and page.inner_text("#make-button") == "Queue it"
    assert page.is_hidden("#gpu-picker") and page.is_visible("#id_gpu_count")
    # A set time and "not yet" need GPUs you pick: offered only once you pick them.
    assert page.is_disabled("#id_when_2") and page.is_disabled("#id_when_3")
    page.get_by_label("GPUs I pick on the list", exact=True).check()
    assert page.is_visible("#gpu-picker") and page.is_hidden("#id_gpu_count")
    page.get_by_label("At a set time", exact=True).check()
    assert page.is_visible("#id_scheduled_start") and page.is_hidden("#id_priority")
    assert page.inner_text("#make-button") == "Create (starts at the set time)"
    page.get_by_label("N GPUs anywhere", exact=True).check()  # "N GPUs": the queue again
    assert page.is_checked("#id_when_0") and page.is_hidden("#id_scheduled_start")
    assert page.is_hidden("#id_host")  # "anywhere" takes no host


def test_the_picked_gpus_flow_from_empty_form_to_its_tasks(login, live_server, owner, lab):
    host, free, taken = lab
    page = login("owner", "pw-owner-1")
    page.goto(f"{live_server.url}/jobs/new/")
    page.get_by_label("GPUs I pick on the list", exact=True).check()
    tile(page, free).click()  # ticking a GPU first chooses its host
    assert page.input_value("#id_host") == str(host.pk)
    assert tile(page, free).locator("input").is_checked() and tile(page, taken).is_visible()
    assert "reserved by other until" in tile(page, taken).inner_text()
    # The owner has no UNIX account mapped: the picker says so on each GPU.
    assert "not for you now: " in tile(page, free).locator(".gt-usable").inner_text()
    assert page.locator(".gpu-pick-host:not([hidden])").count() == 1  # node-2's are hidden

    page.fill("#id_name", "sweep")
    page.fill("#id_template", "python train.py --lr {lr} --bs {bs}")
    page.fill("#id_values", "lr: 0.1, 0.01, 0.001\nbs: 32, 64")
    page.locator("#preview-count").filter(has_text="6 tasks").wait_for()
    shown = page.locator("#preview-commands li").all_inner_texts()
    assert shown[0] == "python train.py --lr 0.1 --bs 32" and len(shown) == 6
    assert not Job.objects.exists()  # previews save nothing

    page.fill("#id_values", "lr 0.1")
    page.locator("#preview-error").filter(has_text="name: value1").wait_for()
    page.fill("#id_values", "lr: 0.1, 0.01, 0.001\nbs: 32, 64")
    page.locator("#preview-count").filter(has_text="6 tasks").wait_for()

    page.get_by_label("Not yet", exact=True).check()
    page.click("#make-button")
    page.wait_for_url("**/jobs/*/")
    tasks = Job.objects.get(name="sweep").tasks.order_by("pk")
    assert [templating.command_line(t.env, t.command) for t in tasks] == shown
    assert all(list(t.devices.all()) == [free] for t in tasks)


def test_the_picker_follows_a_new_booking_without_a_reload(
    login, live_server, owner, other_user, lab
):
    host, free, _ = lab
    page = login("owner", "pw-owner-1")
    page.goto(f"{live_server.url}/jobs/new/")
    page.get_by_label("GPUs I pick on the list", exact=True).check()
    # The snapshot shows a process on it, so it reads busy until booked.
    assert tile(page, free).locator(".gt-state").inner_text() == "in use, not booked"
    end = timezone.now() + timedelta(hours=1)
    create_reservation(other_user, title="late", devices=[free], start=timezone.now(), end=end)
    page.evaluate("window.dispatchEvent(new Event('focus'))")
    with timezone.override(user_zone(owner)):  # the end in the reader's zone, as pages write it
        expected = f"reserved by other until {absolute(end)}"
    tile(page, free).locator(".gt-state").filter(has_text=expected).wait_for()


def test_from_empty_form_to_a_running_task(login, live_server, runner, real_nodes):  # noqa: F811
    node2 = real_nodes[0]
    gpu = node2.devices.get(index=0)
    page = login("owner", "pw-owner-1")
    page.goto(f"{live_server.url}/jobs/new/")
    page.fill("#id_template", "echo {word} on $CUDA_VISIBLE_DEVICES")
    page.get_by_label("GPUs I pick on the list", exact=True).check()
    assert tile(page, gpu).locator(".gt-usable").inner_text() == "✓ you can start here now"
    tile(page, gpu).click()
    page.fill("#id_values", "word: hello, world")
    page.locator("#preview-count").filter(has_text="2 tasks").wait_for()
    page.get_by_label("Now", exact=True).check()
    assert page.inner_text("#make-button") == "Create and start"
    with Workers():
        page.click("#make-button")
        page.wait_for_url("**/jobs/*/")
        tasks = list(Task.objects.filter(job__name__startswith="echo {word}").order_by("pk"))
        assert [t.command for t in tasks] == ["echo hello on $CUDA_VISIBLE_DEVICES"] + [
            "echo world on $CUDA_VISIBLE_DEVICES"
        ]

        def ended():
            job_services.sync_tasks(job_services.tasks_to_sync())  # the running ones
            return all(t.status in Task.ENDED for t in Task.objects.all())

        assert wait_for(ended, timeout=60, step=0.5)
    page.reload()
    assert page.locator("#tasks .status-exited").count() == 2
    for task in Task.objects.all():
        assert (task.status, task.exit_code, task.host) == (Task.Status.EXITED, 0, node2)
        assert list(task.devices.all()) == [gpu]


def test_from_empty_form_to_a_queued_run(login, live_server, runner, real_nodes):  # noqa: F811
    page = login("owner", "pw-owner-1")
    page.goto(f"{live_server.url}/jobs/new/")
    page.click("#make-button")  # nothing filled in: the command is asked for, under it
    assert field_errors(page, "id_template") == ["This field is required."]
    assert not QueuedJob.objects.exists()

    page.fill("#id_template", "echo ran on $CUDA_VISIBLE_DEVICES")
    page.fill("#id_name", "from the form")
    page.click("#make-button")  # the defaults: 1 GPU on any host, as soon as it is free
    page.wait_for_url("**/queue/")
    assert "Queued 'from the form'" in page.inner_text("body")
    assert "1 GPU on one host" in page.locator("tr", has_text="from the form").inner_text()

    assert "1 started" in scheduler.dispatch()

    def ended():
        job_services.sync_tasks(list(Task.objects.select_related("host")))
        scheduler.dispatch()  # notices the run's end
        return QueuedJob.objects.get(name="from the form").state == QueuedJob.State.FINISHED

    assert wait_for(ended, timeout=60, step=0.5)
    page.reload()
    assert "from the form: finished" in page.inner_text("body")
    task = Task.objects.get(job__name="from the form")
    assert (task.status, task.exit_code) == (Task.Status.EXITED, 0)
