"""The guided New job form's GPU picker shows each GPU's live state, and the preview it asks
of the API (/api/jobs/preview/) answers the tasks the form would make (same code as
creating them), saving nothing."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from accesscontrol.services import ensure_default_group
from jobs import templating
from jobs.models import Job
from monitoring.models import Device
from reservations.services import create_reservation
from tests.monitoring.conftest import node  # noqa: F401  (a host with live GPUs, no sshd)

PREVIEW = reverse("api:job-preview")
NEW = reverse("job-new")
GRID = {
    "template": "train --lr {lr} --bs {bs} --note {note}",
    "values": "lr: 0.1, 0.01, 0.001\nbs: 32, 64\nnote: it's $(id)",
    "env": "SEED=1",
}


def preview(client, user, **data):
    """As the form's script asks: its fields' text, JSON."""
    if user:
        client.force_login(user)
    return client.post(PREVIEW, {**GRID, **data}, content_type="application/json")


def test_the_preview_counts_and_lists_the_commands_the_job_gets(client, node, owner):  # noqa: F811
    ensure_default_group()
    answer = preview(client, owner, samples="4", seed="7")
    assert answer.status_code == 200, answer.content
    body = answer.json()
    assert body["count"] == 4 and len(body["commands"]) == 4
    data = {**GRID, "name": "sweep", "host": node.pk, "samples": "4", "seed": "7"}
    data.update(where="devices", gpu_count="1", when="hand")
    assert client.post(NEW, data).status_code == 302
    tasks = Job.objects.get(name="sweep").tasks.order_by("pk")
    assert body["commands"] == [templating.command_line(t.env, t.command) for t in tasks]
    assert body["commands"][0].startswith("SEED=1 train --lr ")
    assert "'it'\"'\"'s $(id)'" in body["commands"][0]  # quoted as the task will run it


def test_a_command_without_values_is_one_task(client, owner):
    body = preview(client, owner, template="python train.py", values="", env="").json()
    assert body == {"count": 1, "commands": ["python train.py"]}


def test_a_big_grid_is_counted_but_only_its_first_commands_are_sent(client, owner):
    values = "a: " + ", ".join(str(i) for i in range(30)) + "\nb: x, y"
    body = preview(client, owner, template="run {a} {b}", values=values, env="").json()
    assert body["count"] == 60 and len(body["commands"]) == 20
    assert body["commands"][:2] == ["run 0 x", "run 0 y"]


@pytest.mark.parametrize(
    ("data", "field", "words"),
    [
        ({"values": "lr 0.1"}, "values", "name: value1"),
        ({"template": "train {lr"}, "template", "not valid"),
        ({"template": "train {lr} {missing}"}, "values", "No value for {missing}"),
        ({"samples": "0"}, "samples", "greater than or equal to 1"),
        ({"env": "1BAD=x"}, "env", "not a valid environment variable"),
        (
            {
                "values": "a: "
                + ", ".join(map(str, range(100)))
                + "\nb: "
                + ", ".join(map(str, range(100)))
            },
            "values",
            "at most",
        ),
    ],
)
def test_bad_input_is_refused_per_field_and_nothing_is_saved(client, owner, data, field, words):
    answer = preview(client, owner, **data)
    assert answer.status_code == 400
    body = answer.json()
    assert words in " ".join(body[field]) and words in body["detail"]
    assert not Job.objects.exists()


def test_values_and_env_may_be_objects_too(client, owner):
    """For scripts: the shapes of POST /api/jobs/grid/; the same commands as the text."""
    as_text = preview(client, owner).json()
    values = {"lr": ["0.1", "0.01", "0.001"], "bs": ["32", "64"], "note": ["it's $(id)"]}
    as_objects = preview(client, owner, values=values, env={"SEED": "1"}).json()
    assert as_objects == as_text and as_text["count"] == 6


@pytest.mark.parametrize(
    ("data", "field"),
    [({"values": ["a"]}, "values"), ({"env": {"A": ["x"]}}, "env"), ({"template": ""}, "template")],
)
def test_wrong_shapes_are_refused_per_field(client, owner, data, field):
    answer = preview(client, owner, **data)
    assert answer.status_code == 400 and field in answer.json()


def test_anonymous_visitors_get_a_403_and_gets_are_refused(client, owner):
    answer = preview(client, None)
    assert answer.status_code == 403 and answer.json()["detail"]
    assert client.get(PREVIEW).status_code == 403
    client.force_login(owner)
    assert client.get(PREVIEW).status_code == 405
    assert client.post("/jobs/new/preview", GRID).status_code == 404  # the page's own is gone


@pytest.mark.parametrize("persona", ["owner", "other_user", "admin_user"])
def test_every_signed_in_user_may_preview(client, persona, request):
    # The preview reads no one's data, so no user sees more than another.
    answer = preview(client, request.getfixturevalue(persona), values="lr: 1, 2\nbs: 3\nnote: n")
    assert answer.status_code == 200 and answer.json()["count"] == 2


def test_the_picker_shows_each_gpu_with_its_state(client, node, owner, other_user):  # noqa: F811
    ensure_default_group()
    busy = Device.objects.create(host=node, index=1, uuid="GPU-2", name="Tesla T4")
    end = timezone.now() + timedelta(hours=2)
    create_reservation(other_user, title="t", devices=[busy], start=timezone.now(), end=end)
    client.force_login(owner)
    html = client.get(NEW).content.decode()
    free_tile = html.split(f'data-gpu="{node.devices.get(index=0).pk}"')[1].split("</label>")[0]
    taken_tile = html.split(f'data-gpu="{busy.pk}"')[1].split("</label>")[0]
    assert 'name="devices"' in free_tile and "reserved by other until" in taken_tile
    assert "gt-reserved" in html.split(f'data-gpu="{busy.pk}"')[0].rsplit("<label", 1)[1]


def test_a_refused_form_keeps_the_ticked_gpus(client, node, owner):  # noqa: F811
    client.force_login(owner)
    gpu = node.devices.get(index=0)
    answer = client.post(NEW, {"where": "devices", "host": node.pk, "devices": [gpu.pk]})
    assert answer.status_code == 400
    tile = answer.content.decode().split(f'data-gpu="{gpu.pk}"')[1].split("</label>")[0]
    assert f'value="{gpu.pk}" checked' in tile


def test_lost_gpus_are_not_offered(client, node, owner):  # noqa: F811
    lost = Device.objects.create(host=node, index=1, uuid="GPU-2", name="T4", status="lost")
    client.force_login(owner)
    html = client.get(NEW).content.decode()
    assert f'data-gpu="{node.devices.get(index=0).pk}"' in html
    assert f'data-gpu="{lost.pk}"' not in html
