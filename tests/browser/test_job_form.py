"""The guided grid form in a browser: the GPU picker shows the chosen host's GPUs with their
live state, the preview lists the tasks as the server expands them before anything is sent,
and the form creates exactly those tasks on the ticked GPU."""

from datetime import timedelta

import pytest
from django.utils import timezone

from accesscontrol.services import ensure_default_group
from jobs import templating
from jobs.models import Job
from monitoring.models import Device
from reservations.services import create_reservation
from tests.monitoring.conftest import node  # noqa: F401  (node-1 up with a GPU; node-2)

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


def test_the_guided_grid_flow_from_empty_form_to_its_tasks(login, live_server, owner, lab):
    host, free, taken = lab
    page = login("owner", "pw-owner-1")
    page.goto(f"{live_server.url}/jobs/new/grid/")
    tile(page, free).click()  # ticking a GPU first chooses its host
    assert page.input_value("#id_host") == str(host.pk)
    assert tile(page, free).locator("input").is_checked() and tile(page, taken).is_visible()
    assert "reserved by other until" in tile(page, taken).inner_text()
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

    page.click("button:has-text('Create')")
    page.wait_for_url("**/jobs/*/")
    tasks = Job.objects.get(name="sweep").tasks.order_by("pk")
    assert [templating.command_line(t.env, t.command) for t in tasks] == shown
    assert all(list(t.devices.all()) == [free] for t in tasks)


def test_the_picker_follows_a_new_booking_without_a_reload(
    login, live_server, owner, other_user, lab
):
    host, free, _ = lab
    page = login("owner", "pw-owner-1")
    page.goto(f"{live_server.url}/jobs/new/grid/")
    # The snapshot shows a process on it, so it reads busy until booked.
    assert tile(page, free).locator(".gt-state").inner_text() == "in use, not booked"
    end = timezone.now() + timedelta(hours=1)
    create_reservation(other_user, title="late", devices=[free], start=timezone.now(), end=end)
    page.evaluate("window.dispatchEvent(new Event('focus'))")
    tile(page, free).locator(".gt-state").filter(has_text="reserved by other").wait_for()
