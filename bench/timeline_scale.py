"""Benchmark: the booking timeline against the week grid, for the same 100 GPUs, one week, on
the demo lab (100 hosts x 8 GPUs, 6 hours of history), in headless Chromium against a real
daphne (the set-up of bench/web_pages.py). Then the timeline of all 800 GPUs.

Per page, cold cache, median of 3 loads: bytes transferred, the page's own HTML bytes, DOM
elements once its bookings are drawn, time to the load event and time until the bookings
are drawn ("ready": the week grid's shading, the timeline's answered feed). The load
average of the machine is printed before and after.

Run: .venv/bin/python bench/timeline_scale.py [--hosts 100] [--gpus 8] [--gpus-shown 100]
"""

import argparse
import logging
import os
import statistics
import time

from django.contrib.auth import get_user_model
from django.core.management import call_command
from playwright.sync_api import sync_playwright
from web_pages import free_port, serve, signed_in_context, wire_size  # sets up Django

from board.demo import seed
from monitoring.models import Device
from reservations.models import CalendarChoice

FIGURES = """() => {
  const nav = performance.getEntriesByType("navigation")[0];
  return {dom: document.getElementsByTagName("*").length, load_ms: nav.loadEventEnd - nav.startTime,
          html: nav.decodedBodySize, ready_ms: performance.now()};
}"""


def prepare(hosts: int, gpus: int, shown: int) -> list[int]:
    """The demo lab; the first ``shown`` GPUs are ada's week-grid choice. Returns their ids."""
    call_command("migrate", verbosity=0)
    call_command("collectstatic", "--noinput", verbosity=0)
    seed(hosts=hosts, gpus=gpus, history_hours=6)
    ids = list(Device.objects.order_by("host__name", "index").values_list("pk", flat=True)[:shown])
    ada = get_user_model().objects.get(username="ada")
    CalendarChoice.objects.update_or_create(user=ada, defaults={"devices": ids})
    return ids


def load(browser, base: str, path: str, ready: str, then=None) -> dict:
    """One cold load; ``then(page)`` acts before the DOM is counted (the load times stay)."""
    context = signed_in_context(browser, base)
    page = context.new_page()
    responses = []
    page.on("response", lambda response: responses.append(response))
    page.goto(base + path, wait_until="load")
    page.wait_for_selector(ready)
    figures = page.evaluate(FIGURES)  # ready_ms: when the bookings stood drawn
    page.wait_for_load_state("networkidle")
    if then:
        then(page)
    figures["dom"] = page.evaluate("document.getElementsByTagName('*').length")
    figures["bytes"] = sum(wire_size(r) for r in responses)
    context.close()
    return figures


def unfold_all(page) -> None:
    page.click("#tl-expand")
    page.wait_for_timeout(100)


HEADER = f"{'page':40} {'KB':>6} {'HTML KB':>8} {'DOM':>6} {'load ms':>8} {'ready ms':>9}"


def row_text(name: str, rows: list[dict]) -> str:
    def m(key):
        return statistics.median(r[key] for r in rows)

    return (
        f"{name:40} {m('bytes') / 1024:6.0f} {m('html') / 1024:8.0f} {m('dom'):6.0f} "
        f"{m('load_ms'):8.0f} {m('ready_ms'):9.0f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=100)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--gpus-shown", type=int, default=100)
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    args = parser.parse_args()
    logging.disable(logging.INFO)  # the demo's audit lines
    started = time.perf_counter()
    ids = prepare(args.hosts, args.gpus, args.gpus_shown)
    print(f"seeded {args.hosts} x {args.gpus} GPUs in {time.perf_counter() - started:.0f} s")
    print("load average before: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    n, everything = args.gpus_shown, args.hosts * args.gpus
    timeline = "/reservations/timeline/"
    busy = "#timeline[aria-busy=false] .tl-row"
    pages = {
        f"week grid, week, {n} GPUs": ("/reservations/calendar/", ".ec-bg-event.permitted", None),
        f"timeline, week, the same {n} GPUs": (
            f"{timeline}?devices={','.join(map(str, ids))}",
            busy,
            None,
        ),
        "  the same, every host unfolded": (
            f"{timeline}?devices={','.join(map(str, ids))}",
            busy,
            unfold_all,
        ),
        f"timeline, week, all {everything} GPUs": (timeline, busy, None),
        "  the same, every host unfolded ": (timeline, busy, unfold_all),
    }
    port = free_port()
    server = serve(port)
    base = f"http://127.0.0.1:{port}"
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=args.chromium, args=["--no-sandbox"])
            load(browser, base, timeline, busy)  # warm the server (templates, first queries)
            print(HEADER)
            for name, (path, ready, then) in pages.items():
                print(row_text(name, [load(browser, base, path, ready, then) for _ in range(3)]))
            browser.close()
    finally:
        server.terminate()
        server.wait(timeout=10)
    print("load average after: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))


if __name__ == "__main__":
    main()
