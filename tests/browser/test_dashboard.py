"""The live GPU board and host pages in a real Chromium, against a real daphne, sshd and the
fake nvidia-smi.

The probing cycle runs in the test process, the web server in another (as the worker and the
web process do in production); on the embedded profile only the database joins them.
"""

import json
import os
import pwd
import subprocess
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection
from django.utils import timezone

from accesscontrol.services import ensure_default_group
from accesscontrol.zones import user_zone
from core import lease
from core.templatetags.hive_time import absolute
from monitoring.connections import pool
from monitoring.loop import LOOP_ACTIVITY, ProbeLoop
from monitoring.models import Device, Host
from reservations.services import create_reservation
from tests.monitoring.conftest import make_host
from tests.monitoring.test_ssh_probe import UUID0, UUID1

pytestmark = pytest.mark.django_db(transaction=True)


def gpu_rows(util0, util1=3):
    return [
        f"0, {UUID0}, 40960, 1000, {util0}, 5, 41, 61.52, NVIDIA A100-SXM4-40GB",
        f"1, {UUID1}, 40960, 2000, {util1}, 5, 43, 70.10, NVIDIA A100-SXM4-40GB",
    ]


def settle(loop):
    """Run cycles until one records a probe (a first SSH login outlasts a short interval).

    In a thread of its own, as in a worker: Playwright's event loop runs in this one, where
    the cycle's push to the channel layer (async_to_sync) would refuse to run. The thread
    has its own database connection, closed when it is done.
    """
    with ThreadPoolExecutor(1) as executor:
        executor.submit(_settle, loop).result()


def _settle(loop):
    try:
        for _ in range(20):
            if loop.cycle():
                return
        raise AssertionError("no probe finished in 20 cycles")
    finally:
        connection.close()


@pytest.fixture
def lab(sshd, gpus, owner):
    """Two hosts behind the real sshd, probed once by a real loop cycle."""
    gpus("127.0.0.2").set_gpus(gpu_rows(11))
    gpus("127.0.0.3").set_gpus(gpu_rows(22))
    hosts = [make_host(sshd, "node-2", "127.0.0.2"), make_host(sshd, "node-3", "127.0.0.3")]
    loop = ProbeLoop(holder="browser-test")
    for _ in range(10):  # until both hosts are probed: tiles exist only for GPUs seen once
        settle(loop)
        if Device.objects.filter(host__in=hosts).count() == 4:
            break
    yield loop, hosts
    loop.executor.shutdown(wait=True)
    pool.close()


def sign_in(page, url, next_page="/"):
    page.goto(f"{url}/accounts/login/?next={next_page}")
    page.fill("input[name=username]", "owner")
    page.fill("input[name=password]", "pw-owner-1")
    page.click("[type=submit]")
    page.wait_for_selector("#live-state")
    # The element comes with the HTML, before the page's scripts have run: a filter changed
    # before board.js listens would be lost.
    page.wait_for_load_state("load")


def tile(host, index=0):
    """The board tile of a GPU of ``host``."""
    return f"#gpu-{host.devices.get(index=index).pk}"


def figures(page, host, index=0):
    return page.locator(f"{tile(host, index)} .gt-figs").inner_text()


def test_the_board_follows_a_change_on_a_host_within_one_interval(
    asgi_live_server, lab, gpus, page
):
    loop, (node2, node3) = lab
    sign_in(page, asgi_live_server)
    page.wait_for_function("document.getElementById('live-state').textContent === 'live'")
    assert figures(page, node2).startswith("11 %")
    assert figures(page, node3).startswith("22 %")
    page.evaluate("window.notReloaded = true")

    gpus("127.0.0.2").set_gpus(gpu_rows(97))
    settle(loop)  # probe, store, signal, publish: in this process, not the web server's
    # The page polls nothing itself: the server's websocket pushes once it sees the new probe.
    interval_ms = settings.MONITORING_INTERVAL * 1000
    page.wait_for_function(
        f"document.querySelector('{tile(node2)} .gt-figs').textContent.startsWith('97 %')",
        timeout=interval_ms + 1500,
    )
    assert page.evaluate("window.notReloaded === true")
    assert figures(page, node3).startswith("22 %")
    width = page.eval_on_selector(f"{tile(node2)} .gt-util", "bar => bar.style.width")
    assert width == "97%"
    # Every cycle stored, signalled and pushed without a failure (the push once failed in
    # the test's own thread, hidden by the database marker the page also follows).
    assert lease.activity(LOOP_ACTIVITY).last_error == ""


def test_a_tile_names_whose_processes_run_on_it_live(asgi_live_server, lab, gpus, page):
    """board.js writes the owner as the server words it (owner_text: "alice", "alice
    (container train-3)"), never a raw field."""
    loop, (node2, _) = lab
    sign_in(page, asgi_live_server)
    page.wait_for_function("document.getElementById('live-state').textContent === 'live'")
    users = f"document.querySelector('{tile(node2)} .gt-users').textContent"
    assert page.evaluate(users) == "no processes"
    with subprocess.Popen(["sleep", "305"]) as process:
        try:
            gpus("127.0.0.2").set_processes([f"{UUID0}, {process.pid}, 100, sleep"])
            settle(loop)
            page.wait_for_function(
                f"{users} === {json.dumps(pwd.getpwuid(os.getuid()).pw_name)}",
                timeout=settings.MONITORING_INTERVAL * 1000 + 1500,
            )
        finally:
            process.kill()


def test_a_host_page_chart_moves_live(asgi_live_server, lab, gpus, page):
    loop, (node2, _) = lab
    sign_in(page, asgi_live_server, f"/hosts/{node2.name}/")
    chart = f"#host-{node2.pk} .chart[data-chart=gpu_utilization] canvas"
    page.wait_for_selector(chart)
    before = page.eval_on_selector(chart, "c => c.toDataURL()")
    gpus("127.0.0.2").set_gpus(gpu_rows(97))
    settle(loop)
    page.wait_for_function(
        f"document.querySelector('#host-{node2.pk} table.gpus tbody td:nth-child(3)')"
        ".textContent === '97'",
        timeout=settings.MONITORING_INTERVAL * 1000 + 1500,
    )
    assert page.eval_on_selector(chart, "c => c.toDataURL()") != before  # the chart moved


def test_a_host_that_stops_answering_is_shown_down_live(asgi_live_server, lab, gpus, page):
    loop, (node2, _) = lab
    sign_in(page, asgi_live_server)
    gpus("127.0.0.2").set_mode("fail")
    settle(loop)
    page.wait_for_function(f"document.querySelector('{tile(node2)}').classList.contains('gt-down')")
    assert page.locator(f"{tile(node2)} .gt-state").inner_text() == "host down"
    gpus("127.0.0.2").set_mode("normal")


def test_the_filter_shows_only_matching_gpus_and_is_kept_in_the_address(
    asgi_live_server, lab, page
):
    _, (node2, node3) = lab
    sign_in(page, asgi_live_server)
    page.select_option("#filter-host", "node-3")
    assert page.locator(f"{tile(node2)}").is_hidden()
    assert page.locator(f"{tile(node3)}").is_visible()
    assert "host=node-3" in page.url
    page.reload()
    page.wait_for_selector("#live-state")
    assert page.locator(f"{tile(node2)}").is_hidden()
    assert page.input_value("#filter-host") == "node-3"
    page.check("#filter-mine")  # owner has nothing booked
    assert page.locator(".gpu-tile:visible").count() == 0
    assert page.locator("#filter-count").inner_text() == "0 shown"


def test_the_chosen_charts_and_order_are_remembered(asgi_live_server, lab, page):
    _, (node2, _) = lab
    sign_in(page, asgi_live_server, f"/hosts/{node2.name}/")
    page.click("#layout-controls summary")
    saved = "#layout-message:text('Saved.')"
    page.uncheck("#chart-choices input[value=gpu_power]")
    page.wait_for_selector(saved)
    page.evaluate("document.getElementById('layout-message').textContent = ''")
    page.click("#chart-choices li[data-chart=cpu] button.up")
    page.wait_for_selector(saved)

    page.reload()
    page.wait_for_selector(f"#host-{node2.pk} .chart[data-chart=cpu]")
    shown = page.eval_on_selector_all(
        f"#host-{node2.pk} .chart", "charts => charts.map(c => c.dataset.chart)"
    )
    assert shown == ["gpu_utilization", "gpu_memory", "gpu_temperature", "cpu", "ram"]
    assert not page.is_checked("#chart-choices input[value=gpu_power]")


def test_a_tile_leads_to_the_host_page_with_its_hardware_and_history(asgi_live_server, lab, page):
    _, (node2, _) = lab
    sign_in(page, asgi_live_server)
    page.click(f"{tile(node2)} .gt-name")
    page.wait_for_selector("table.hardware")
    node2 = Host.objects.get(pk=node2.pk)
    hardware = page.locator("table.hardware").inner_text()
    assert node2.hardware["driver_version"] in hardware and "12.2" in hardware
    assert "NVIDIA A100-SXM4-40GB" in page.locator("table.inventory").inner_text()
    page.wait_for_selector("#history-message:text('points')")
    assert page.locator("#history-chart .chart").count() == 4


def test_the_host_page_writes_live_times_as_the_server_does(asgi_live_server, lab, gpus, page):
    """One way to show time: the live card's "last seen" reads like the page the server wrote
    ("Thu 26 Nov 14:05 (now)"), in the reader's zone, after a live update too."""
    loop, (node2, _) = lab
    sign_in(page, asgi_live_server, f"/hosts/{node2.name}/")
    state = f"#host-{node2.pk} .state"
    gpus("127.0.0.2").set_gpus(gpu_rows(55))
    settle(loop)
    page.wait_for_function(
        f"document.querySelector('#host-{node2.pk} table.gpus tbody td:nth-child(3)')"
        ".textContent === '55'",
        timeout=settings.MONITORING_INTERVAL * 1000 + 1500,
    )
    node2.refresh_from_db()
    with timezone.override(user_zone(reader())):
        expected = f"last seen {absolute(node2.last_seen)} (now)"
    assert expected in page.locator(state).inner_text()


def reader():
    return get_user_model().objects.get(username="owner")


def test_the_board_repaints_booking_states_from_the_api(asgi_live_server, lab, page, other_user):
    """Each minute the board reads /api/device-states/: a booking made meanwhile shows on its
    tile without a reload, its end in the reader's zone, as the server writes it."""
    _, (node2, _) = lab
    ensure_default_group()
    page.clock.install()  # the minute passes at once below
    sign_in(page, asgi_live_server)
    gpu = node2.devices.get(index=0)
    end = timezone.now() + timedelta(hours=2)
    create_reservation(other_user, title="t", devices=[gpu], start=timezone.now(), end=end)
    page.clock.run_for(61_000)
    with timezone.override(user_zone(reader())):
        expected = f"reserved by other until {absolute(end)}"
    page.locator(f"{tile(node2)} .gt-state").filter(has_text=expected).wait_for()
