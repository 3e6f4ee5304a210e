"""The GPU board (the landing page): one tile per GPU with its figures, users and booking
state, a summary line, and the GPU states API the page refreshes from."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from accesscontrol.services import ensure_default_group
from core.templatetags.hive_time import absolute
from jobs.models import Job, Task
from monitoring.models import Device, Host
from reservations.services import create_reservation
from tests.monitoring.test_api import in_containers

STATES = reverse("api:device-state-list")


def section(html: str, host) -> str:
    """The HTML of one host's part of the board."""
    return html.split(f'id="host-{host.pk}"')[1].split("</section>")[0]


def board(client, user):
    client.force_login(user)
    return client.get(reverse("overview")).content.decode()


@pytest.fixture
def booked(node, owner, other_user):
    """node-1 with two more GPUs: GPU-1 reserved by other, GPU-2 running owner's job."""
    ensure_default_group()
    gpus = [Device.objects.get(uuid="GPU-1")] + [
        Device.objects.create(host=node, index=i, uuid=f"GPU-{i + 1}", name="Tesla T4")
        for i in (1, 2)
    ]
    end = timezone.now() + timedelta(hours=3)
    create_reservation(other_user, title="t", devices=gpus[:1], start=timezone.now(), end=end)
    job = Job.objects.create(owner=owner, name="sweep")
    task = Task.objects.create(job=job, host=node, command="x", status=Task.Status.RUNNING)
    task.devices.set(gpus[2:])
    return gpus, job, end


def test_a_down_host_shows_its_error_and_last_seen_time(client, node, owner):
    down = Host.objects.get(name="node-2")
    down.last_seen = node.created
    down.save()
    html = section(board(client, owner), down)
    assert "Unreachable" in html and "timed out" in html
    assert "last seen <time" in html and absolute(down.last_seen) in html


def test_a_down_host_never_seen_says_so_and_shows_no_stale_figures(client, node, owner):
    down = Host.objects.get(name="node-2")
    down.last_snapshot = node.last_snapshot  # stale data from before it went down
    down.save()
    html = section(board(client, owner), down)
    assert "never seen" in html and "unknown owner" not in html


def test_a_tile_says_whose_container_runs_on_it(client, node, owner):
    in_containers(node)
    html = section(board(client, owner), node)
    assert "alice (container train-3), container eval-7 (owner unknown)" in html


def test_a_lost_gpu_is_flagged(client, node, owner):
    Device.objects.create(host=node, index=1, uuid="GPU-2", name="Tesla V100", status="lost")
    html = board(client, owner)
    assert "GPU lost: not seen since" in html and "Tesla V100" in html


def test_tiles_say_who_reserved_and_what_runs(client, booked, owner, other_user):
    gpus, job, end = booked
    html = board(client, owner)
    assert f"reserved by other until {absolute(end)}" in html
    assert f"your job {job.pk}" in html
    client.force_login(other_user)
    html = client.get(reverse("overview")).content.decode()
    assert (
        f"your reservation until {absolute(end)}" in html and f"owner&#x27;s job {job.pk}" in html
    )


def test_the_summary_counts_free_reserved_running_and_down(client, booked, owner):
    html = board(client, owner)
    # GPU-1 is reserved, GPU-3 runs a job: GPU-2 alone is free.
    assert "1 of 3 GPUs free" in html and "1 reserved, 1 running jobs" in html
    assert "1 of 2 hosts down" in html


def test_the_states_api_lists_booked_gpus_for_the_reader(client, booked, owner, other_user):
    gpus, job, end = booked
    states = client_states(client, owner)
    assert states[gpus[0].pk] == {
        "device": gpus[0].pk,
        "state": "reserved",
        "text": "reserved by other",
        "until": end.isoformat().replace("+00:00", "Z"),
        "mine": False,
        "job": None,
    }
    running = {"state": "job", "text": f"your job {job.pk}", "until": None, "mine": True}
    assert states[gpus[2].pk] == {"device": gpus[2].pk, **running, "job": job.pk}
    assert gpus[1].pk not in states  # free
    theirs = client_states(client, other_user)
    assert (theirs[gpus[0].pk]["text"], theirs[gpus[0].pk]["mine"]) == ("your reservation", True)
    assert theirs[gpus[2].pk]["text"] == f"owner's job {job.pk}"


def test_anonymous_visitors_are_sent_to_sign_in(client, node):
    response = client.get(reverse("overview"))
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]
    assert client.get(STATES).status_code == 403


@pytest.mark.parametrize("persona", ["owner", "other_user", "admin_user"])
@pytest.mark.parametrize("url", [reverse("overview"), STATES])
def test_signed_in_users_and_admins_see_the_board(client, booked, persona, url, request):
    client.force_login(request.getfixturevalue(persona))
    assert client.get(url).status_code == 200


def test_the_old_states_endpoint_is_gone(client, owner):
    client.force_login(owner)
    assert client.get("/board/states.json").status_code == 404


def test_a_free_gpu_the_viewer_may_not_use_is_not_called_free(
    client, booked, owner, django_user_model
):
    """ "free" means free for the viewer: without a grant for the GPU now, the tile, the
    summary and the states the page refreshes from say "free, not yours to use"."""
    gpus, _, _ = booked
    outsider = django_user_model.objects.create_user("outsider", password="x")
    outsider.groups.clear()  # no grant at all (the default group's is the only one)
    html = board(client, outsider)
    assert "0 of 3 GPUs free" in html
    assert f'class="gpu-tile gt-closed" id="gpu-{gpus[1].pk}"' in html
    tile = html.split(f'id="gpu-{gpus[1].pk}"')[1].split("</article>")[0]
    assert "free, not yours to use" in tile
    states = client_states(client, outsider)
    closed = {"state": "closed", "text": "free, not yours to use", "until": None, "mine": False}
    assert states[gpus[1].pk] == {"device": gpus[1].pk, **closed, "job": None}
    assert states[gpus[0].pk]["state"] == "reserved"  # a booking says more
    assert gpus[1].pk not in client_states(client, owner)  # free for the owner


def client_states(client, user) -> dict:
    client.force_login(user)
    return {state["device"]: state for state in client.get(STATES).json()}
