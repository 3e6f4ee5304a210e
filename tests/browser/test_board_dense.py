"""The dense board at the demo lab's 800 GPUs (100 hosts x 8) in a real Chromium, served by
a real daphne: it fits 4 screens at 1440 x 900, a cell's detail opens from the keyboard, the
intruder protection flagged stands out in words, live rows arrive, and axe-core finds no
serious or critical violation in light or dark."""

import pytest
from django.utils import timezone

from board.demo import PASSWORD, seed
from monitoring.connections import pool
from monitoring.inventory import record_probe
from monitoring.models import Device, Host
from monitoring.probes import probe_host
from protection.detection import check_hosts
from protection.models import Violation
from tests.browser.test_pages import AXE, AXE_OPTIONS

pytestmark = pytest.mark.django_db(transaction=True)
SCREEN = {"width": 1440, "height": 900}


@pytest.fixture
def big_lab(settings, tmp_path):
    settings.HIVE_DATA_DIR = tmp_path
    pool.close()
    seed(hosts=100, gpus=8, history_hours=0, down=2)
    intruded = Host.objects.get(name="demo-001")  # linus runs on ada's booking there
    for _ in range(3):  # past the grace of a process there at the booking's start
        record_probe(intruded, probe_host(intruded))
        check_hosts([intruded.pk])
    yield
    pool.close()


def sign_in(page, base):
    page.set_viewport_size(SCREEN)
    page.goto(f"{base}/accounts/login/")
    page.fill("input[name=username]", "ada")
    page.fill("input[name=password]", PASSWORD)
    page.click("[type=submit]")
    page.wait_for_load_state()


def serious_violations(page):
    page.add_script_tag(path=str(AXE))
    return page.evaluate(
        f"""async () => (await axe.run(document, {AXE_OPTIONS})).violations
            .filter(v => v.impact === "serious" || v.impact === "critical")
            .map(v => v.id + ": " + v.nodes.slice(0, 3).map(n => n.target.join(" ")).join(", "))"""
    )


def test_800_gpus_fit_four_screens_and_read_by_keyboard(asgi_live_server, big_lab, page):
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    sign_in(page, asgi_live_server)
    page.goto(f"{asgi_live_server}/")
    # Dense by default at this size: 800 GPUs seen, and the one the demo lab lost.
    assert page.locator(".board-dense .dc").count() == 801
    assert page.locator(".dc.dc-lost").count() == 1
    height = page.evaluate("document.documentElement.scrollHeight")
    assert height <= 4 * SCREEN["height"], f"{height} px is {height / SCREEN['height']:.1f} screens"
    assert page.evaluate("document.querySelectorAll('*').length") <= 5000
    page.wait_for_function("document.getElementById('live-state').textContent === 'live'")

    intruder = page.locator(".dc.dc-intruder")
    assert intruder.count() == 1 and intruder.inner_text() == "1!"  # a glyph, not colour only
    assert "INTRUDER: linus" in intruder.get_attribute("aria-label")
    assert "1 with an intruder" in page.locator("#board-summary").inner_text()

    intruder.focus()
    page.keyboard.press("Enter")
    detail = page.locator(".dense-detail")
    assert detail.is_visible() and "INTRUDER: linus" in detail.inner_text()
    assert "demo-001:1" in detail.inner_text() and intruder.get_attribute("aria-expanded") == "true"
    page.keyboard.press("Escape")
    assert detail.count() == 0

    page.select_option("#filter-sort", "trouble")  # intruders, lost GPUs, down hosts first
    assert page.locator(".board-host").first.get_attribute("data-host") == "demo-001"
    assert "sort=trouble" in page.url
    assert errors == []


def test_intruders_come_and_go_live(asgi_live_server, big_lab, page):
    """The mark follows protection's violations without a reload: it goes when the intruder
    does, and one on another GPU shows at the next probe."""
    sign_in(page, asgi_live_server)
    page.goto(f"{asgi_live_server}/")
    page.wait_for_function("document.getElementById('live-state').textContent === 'live'")
    assert page.locator(".dc.dc-intruder").inner_text() == "1!"
    now = timezone.now()
    Violation.objects.filter(ended_at=None).update(ended_at=now)
    other = Device.objects.get(host__name="demo-003", index=5)
    Violation.objects.create(
        device=other, pid=4242, offender_unix="mallory", first_seen=now, last_seen=now
    )
    Host.objects.filter(name="demo-002").update(last_probe_at=now)  # a probe was recorded
    page.wait_for_function(
        "document.querySelector('.dc.dc-intruder')?.id === 'gpu-" + str(other.pk) + "'"
    )
    cell = page.locator(".dc.dc-intruder")
    assert cell.count() == 1 and cell.inner_text() == "5!"
    assert cell.get_attribute("aria-label").endswith(" · INTRUDER: mallory")
    first = Device.objects.get(host__name="demo-001", index=1)
    assert page.locator(f"#gpu-{first.pk}").inner_text() == "1"  # its "!" went

    # The tiles: the "intruder:" line goes and comes with the violations, without a reload.
    page.goto(f"{asgi_live_server}/?layout=tiles")
    page.wait_for_function("document.getElementById('live-state').textContent === 'live'")
    line = page.locator(f"#gpu-{other.pk} .gt-intruder")
    assert line.inner_text() == "! intruder: mallory"
    Violation.objects.filter(ended_at=None).update(ended_at=timezone.now())
    Host.objects.filter(name="demo-002").update(last_probe_at=timezone.now())
    line.wait_for(state="detached")
    Violation.objects.create(
        device=first, pid=77, offender_unix="eve", first_seen=now, last_seen=now
    )
    Host.objects.filter(name="demo-002").update(last_probe_at=timezone.now())
    page.locator(f"#gpu-{first.pk} .gt-intruder").wait_for()
    assert page.locator(f"#gpu-{first.pk} .gt-intruder").inner_text() == "! intruder: eve"


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_dense_board_is_axe_clean(asgi_live_server, big_lab, page, scheme):
    page.emulate_media(color_scheme=scheme)
    sign_in(page, asgi_live_server)
    page.goto(f"{asgi_live_server}/")
    page.wait_for_load_state("load")
    assert page.evaluate("document.documentElement.dataset.bsTheme") == scheme
    assert serious_violations(page) == []
    page.set_viewport_size({"width": 390, "height": 844})  # a phone: no sideways scrolling
    width = "document.documentElement.scrollWidth - document.documentElement.clientWidth"
    assert page.evaluate(width) == 0
