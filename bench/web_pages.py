"""Benchmark: the web pages with 100 hosts x 8 GPUs and 6 hours of history, in headless
Chromium (Debian's, driven by Playwright) against a real daphne, as production serves them.

For the GPU board (/), the calendar (one week, 32 GPUs) and the booking overview (800 GPUs,
one week), on a cold cache, median of 3 loads: bytes transferred (compressed where the
server compresses), requests, DOM elements, server time (request to first byte), time to the
load event. Then the cost of one live update of the board: one host's probe changes, the
websocket pushes the snapshot, board.js updates the tiles (bytes of the message, script time).

Run: .venv/bin/python bench/web_pages.py [--hosts 100] [--gpus 8]
"""

import argparse
import logging
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
ENV = {
    "HIVE_DATA_DIR": tempfile.mkdtemp(prefix="hive-web-bench-"),
    "DJANGO_SETTINGS_MODULE": "hiveproject.settings",
    "ALLOWED_HOSTS": "127.0.0.1,localhost",
    "MONITORING_INTERVAL": "2",
    # Playwright's sync API keeps an event loop in this thread; the ORM calls here block.
    "DJANGO_ALLOW_ASYNC_UNSAFE": "true",
}
os.environ.update(ENV)

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402
from playwright.sync_api import sync_playwright  # noqa: E402

from board.demo import PASSWORD, probe_result, seed  # noqa: E402
from monitoring.inventory import record_probe  # noqa: E402
from monitoring.models import Device, Host  # noqa: E402
from reservations.models import CalendarChoice  # noqa: E402

MEASURE = """() => {
  const nav = performance.getEntriesByType("navigation")[0];
  return {
    dom: document.getElementsByTagName("*").length,
    server_ms: nav.responseStart - nav.requestStart,
    load_ms: nav.loadEventEnd - nav.startTime,
  };
}"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def prepare(hosts: int, gpus: int) -> None:
    call_command("migrate", verbosity=0)
    call_command("collectstatic", "--noinput", verbosity=0)
    seed(hosts=hosts, gpus=gpus, history_hours=6)
    ada = Device.objects.model._meta.apps.get_model("auth", "User").objects.get(username="ada")
    week_gpus = Device.objects.order_by("host__name", "index").values_list("pk", flat=True)[:32]
    CalendarChoice.objects.update_or_create(user=ada, defaults={"devices": list(week_gpus)})


def serve(port: int) -> subprocess.Popen:
    """The web server we ship (core.webserver: daphne with request bounds and websocket
    compression), on the bench's data directory."""
    argv = [sys.executable, "-m", "core.webserver", "-b", "127.0.0.1", "-p", str(port)]
    server = subprocess.Popen(
        [*argv, "hiveproject.asgi:application"],
        cwd=ROOT,
        env={**os.environ, **ENV},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for _ in range(150):  # a new interpreter: up to 30 s on a loaded machine
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return server
        except OSError:
            time.sleep(0.2)
    server.terminate()
    raise SystemExit("the web server did not start")


def signed_in_context(browser, base: str):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.goto(f"{base}/accounts/login/")
    page.fill("input[name=username]", "ada")
    page.fill("input[name=password]", PASSWORD)
    page.click("[type=submit]")
    page.wait_for_load_state()
    return context


def load(browser, base: str, path: str, ready: str) -> dict:
    """One cold load (a fresh browser context: nothing cached but the session)."""
    context = signed_in_context(browser, base)
    page = context.new_page()
    responses = []
    page.on("response", lambda response: responses.append(response))
    page.goto(base + path, wait_until="load")
    page.wait_for_selector(ready)
    page.wait_for_load_state("networkidle")
    figures = page.evaluate(MEASURE)
    # What came over the wire: each body as sent (compressed where the server compresses),
    # by its Content-Length, or its decoded length where it has none.
    figures["bytes"] = sum(wire_size(response) for response in responses)
    figures["requests"] = len(responses)
    context.close()
    return figures


def wire_size(response) -> int:
    length = response.headers.get("content-length")
    return int(length) if length else len(response.body())


def live_update(browser, base: str, rounds: int = 3) -> list[tuple[int, float]]:
    """(bytes of the pushed snapshot, board.js milliseconds) for one changed host, per round."""
    context = signed_in_context(browser, base)
    page = context.new_page()
    frames = []
    page.on("websocket", lambda ws: ws.on("framereceived", lambda p: frames.append(len(p))))
    page.goto(base + "/")
    page.wait_for_function("document.getElementById('live-state').textContent === 'live'")
    page.wait_for_timeout(500)
    host = Host.objects.get(name="demo-001")
    results = []
    for n in range(rounds):
        frames.clear()
        page.evaluate("window.hiveBoardUpdateMs = undefined")
        record_probe(host, probe_result(random.Random(n), host, 1, 8, 0.9))  # noqa: S311
        page.wait_for_function("window.hiveBoardUpdateMs !== undefined", timeout=15_000)
        results.append((frames[-1], page.evaluate("window.hiveBoardUpdateMs")))
    context.close()
    return results


def median(rows: list[dict], key: str) -> float:
    return statistics.median(row[key] for row in rows)


HEADER = f"{'page':28} {'KB':>7} {'requests':>8} {'DOM':>7} {'server ms':>9} {'load ms':>8}"


def row_text(name: str, rows: list[dict]) -> str:
    kb, requests = median(rows, "bytes") / 1024, median(rows, "requests")
    dom, server, loaded = median(rows, "dom"), median(rows, "server_ms"), median(rows, "load_ms")
    return f"{name:28} {kb:7.0f} {requests:8.0f} {dom:7.0f} {server:9.0f} {loaded:8.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=100)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    args = parser.parse_args()
    started = time.perf_counter()
    logging.disable(logging.INFO)  # the demo's audit lines
    prepare(args.hosts, args.gpus)
    print(f"seeded {args.hosts} hosts x {args.gpus} GPUs in {time.perf_counter() - started:.0f} s")
    port = free_port()
    server = serve(port)
    base = f"http://127.0.0.1:{port}"
    pages = {
        "GPU board": ("/", "#board .dc, #board .gpu-tile"),
        "calendar, week, 32 GPUs": ("/reservations/calendar/", ".ec-bg-event.permitted"),
        "overview, week, all GPUs": ("/reservations/overview/", ".ov-row"),
    }
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=args.chromium, args=["--no-sandbox"])
            load(browser, base, "/", "#board")  # warm the server (templates, first queries)
            print(HEADER)
            for name, (path, ready) in pages.items():
                rows = [load(browser, base, path, ready) for _ in range(3)]
                print(row_text(name, rows))
            updates = live_update(browser, base)
            size = statistics.median(b for b, _ in updates) / 1024
            script = statistics.median(ms for _, ms in updates)
            print(
                f"live update of the board (one host changed): message {size:.0f} KB, "
                f"script {script:.1f} ms (median of {len(updates)})"
            )
            browser.close()
    finally:
        server.terminate()
        server.wait(timeout=10)


if __name__ == "__main__":
    main()
