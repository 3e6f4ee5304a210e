"""The board's layouts: tiles for a lab that fits a screen of them, one line per host (a
cell per GPU) past that or when asked; intruders protection flagged show in both."""

import pytest
from django.urls import reverse
from django.utils import timezone

from board.views import TILES_FIT_GPUS
from monitoring.models import Device
from protection.models import Violation

pytestmark = pytest.mark.django_db


def board(client, user, query=""):
    client.force_login(user)
    return client.get(reverse("overview") + query)


def add_gpus(node, count):
    for i in range(1, count + 1):
        Device.objects.create(host=node, index=i, uuid=f"GPU-X{i}", name="Tesla T4")


def test_a_small_lab_gets_tiles_and_a_large_one_the_dense_board(client, node, owner):
    assert 'class="gpu-tile' in board(client, owner).content.decode()
    add_gpus(node, TILES_FIT_GPUS)
    html = board(client, owner).content.decode()
    assert 'class="board-dense"' in html and 'class="gpu-tile' not in html
    assert html.count('class="dc ') == Device.objects.count()
    assert 'class="gpu-tile' in board(client, owner, "?layout=tiles").content.decode()


def test_a_layout_it_does_not_know_is_a_clear_400(client, node, owner):
    answer = board(client, owner, "?layout=huge")
    assert answer.status_code == 400 and b"layout must be one of: dense, tiles" in answer.content


def test_a_dense_cell_says_it_all_in_its_label(client, node, owner):
    Device.objects.create(host=node, index=1, uuid="GPU-2", name="Tesla V100", status="lost")
    html = board(client, owner, "?layout=dense").content.decode()
    assert 'aria-label="node-1:0 Tesla T4 · 7 % ·' in html
    assert 'class="dc gt-down dc-lost"' in html and "GPU lost: not seen since" in html


@pytest.mark.parametrize("layout", ["tiles", "dense"])
def test_an_intruder_stands_out_in_words(client, node, owner, layout):
    now = timezone.now()
    device = Device.objects.get(uuid="GPU-1")
    Violation.objects.create(
        device=device, pid=4242, offender_unix="linus", first_seen=now, last_seen=now
    )
    Violation.objects.create(  # over: not shown
        device=device, pid=1, offender_unix="gone", first_seen=now, last_seen=now, ended_at=now
    )
    html = board(client, owner, f"?layout={layout}").content.decode()
    assert "1 with an intruder" in html and "gone" not in html
    if layout == "dense":
        assert 'data-intruder="linus"' in html and "INTRUDER: linus" in html
    else:
        assert "intruder: linus" in html
