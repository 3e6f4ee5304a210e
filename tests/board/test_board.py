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


# --- MIG slices --------------------------------------------------------------------------------


@pytest.fixture
def split(node, owner, other_user):
    """node-1's GPU in MIG mode (its last probe with two slices' memory); other books slice 1."""
    ensure_default_group()
    gpu = Device.objects.get(uuid="GPU-1")
    gpu.mig_enabled = True
    gpu.save()
    slices = [
        Device.objects.create(
            host=node, index=0, uuid=f"MIG-{n}", name="Tesla T4", parent=gpu,
            mig_profile="2g.8gb", mig_index=n, memory_total_mib=7680,
        )
        for n in range(2)
    ]  # fmt: skip
    node.last_snapshot = {
        **node.last_snapshot,
        "processes": [],
        "slices": [{"uuid": "MIG-0", "memory_used_mib": 2048, "memory_total_mib": 7680}],
    }
    node.save()
    end = timezone.now() + timedelta(hours=3)
    create_reservation(other_user, title="t", devices=slices[1:], start=timezone.now(), end=end)
    return gpu, slices


def test_slices_are_shown_under_their_gpu(client, split, owner):
    gpu, slices = split
    html = section(board(client, owner), gpu.host)
    tiles = html.split("<article")[1:]
    assert [t.split('class="gt-name"')[1].split(">")[1].split("<")[0] for t in tiles] == [
        "node-1:0",
        "node-1:0.0",
        "node-1:0.1",
    ]
    assert "T4 · MIG" in tiles[0] and "data-slice" not in tiles[0]
    assert 'data-slice="1"' in tiles[1] and "MIG 2g.8gb" in tiles[1]
    assert "2.0/7.5 GiB" in tiles[1] and "°C" not in tiles[1]  # a slice's memory alone
    assert "reserved by other" in tiles[2]
    # The GPU is not free while one of its slices is booked.
    assert "MIG slices in use" in tiles[0] and 'data-free="1"' not in tiles[0]


def test_a_booking_of_the_gpu_shows_on_its_slices(client, node, owner, other_user):
    ensure_default_group()
    gpu = Device.objects.get(uuid="GPU-1")
    gpu.mig_enabled = True
    gpu.save()
    piece = Device.objects.create(
        host=node, index=0, uuid="MIG-0", parent=gpu, mig_profile="7g.40gb", mig_index=0
    )
    end = timezone.now() + timedelta(hours=3)
    create_reservation(other_user, title="t", devices=[gpu], start=timezone.now(), end=end)
    client.force_login(owner)
    states = {state["device"]: state for state in client.get(STATES).json()}
    assert {**states[piece.pk], "device": gpu.pk} == states[gpu.pk]
    assert states[piece.pk]["text"] == "reserved by other" and states[piece.pk]["until"]


def test_the_dense_view_puts_slices_after_their_gpu_on_its_host_line(client, split, owner):
    gpu, slices = split
    client.force_login(owner)
    html = client.get(reverse("overview") + "?layout=dense").content.decode()
    line = html.split(f'id="host-{gpu.host.pk}"')[1].split("</tr>")[0]
    cells = line.split('<button type="button" class="dc ')[1:]
    assert [c.split(">")[1].split("<")[0] for c in cells] == ["0", "0.0", "0.1"]
    assert 'data-slice="1"' in cells[1] and 'data-slice="1"' not in cells[0]
    assert 'aria-label="node-1:0.0 MIG 2g.8gb · 2.0/7.5 GiB' in cells[1]
    assert "reserved by other" in cells[2] and "MIG slices in use" in cells[0]
