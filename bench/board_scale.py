"""Benchmark: the GPU board at 100 hosts x 8 GPUs (the demo lab), dense against tiles, in
headless Chromium at 1440 x 900 against the real web server (core.webserver, websockets
compressed), in one run.

Per layout, median of 3 cold loads: the board's HTML (bytes raw, and gzip -6 of it), DOM
elements, page height in screens, time to the load event. Then live: the board's first
websocket message and its bytes per minute while every host is probed again each cycle
(every GPU's figures change), for the board's subscription (view=board, what both layouts
use now) and for the whole-lab snapshot every page got before (no view), as JSON and as an
estimate of permessage-deflate on the wire (one zlib stream per socket, as browsers
negotiate it). The machine's load average is printed beside.

Run: .venv/bin/python bench/board_scale.py [--hosts 100] [--gpus 8] [--seconds 30]
"""

import argparse
import gzip
import logging
import os
import random
import statistics
import sys
import time
import zlib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from django.core.management import call_command  # noqa: E402
from playwright.sync_api import sync_playwright  # noqa: E402
from web_pages import free_port, serve, signed_in_context  # noqa: E402 (sets up Django)

from board.demo import probe_result, seed  # noqa: E402
from monitoring.inventory import record_probe  # noqa: E402
from monitoring.models import Host  # noqa: E402

SCREEN = {"width": 1440, "height": 900}
LAYOUTS = {"tiles (before)": "/?layout=tiles", "dense": "/?layout=dense"}
MEASURE = """() => {
  const nav = performance.getEntriesByType("navigation")[0];
  return {dom: document.getElementsByTagName("*").length, load_ms: nav.loadEventEnd - nav.startTime,
          screens: document.documentElement.scrollHeight / window.innerHeight};
}"""
# A socket opened from the page, tallying what it receives (JSON text, as the page gets it).
LISTEN = """([path, name]) => {
  const scheme = location.protocol === "https:" ? "wss://" : "ws://";
  const tally = window[name] = {frames: []};
  const ws = new WebSocket(scheme + location.host + path);
  ws.onmessage = (e) => tally.frames.push(e.data);
}"""


def load(browser, base: str, path: str) -> dict:
    context = signed_in_context(browser, base)
    page = context.new_page()
    page.set_viewport_size(SCREEN)
    response = page.goto(base + path, wait_until="load")
    html = response.body()
    figures = page.evaluate(MEASURE)
    figures["html"], figures["html_gz"] = len(html), len(gzip.compress(html, 6))
    context.close()
    return figures


def deflated(frames: list[str]) -> int:
    """Bytes of the frames through one deflate stream with context takeover (RFC 7692)."""
    stream = zlib.compressobj(6, zlib.DEFLATED, -15)
    return sum(
        len(stream.compress(f.encode()) + stream.flush(zlib.Z_SYNC_FLUSH)) - 4 for f in frames
    )


def live(browser, base: str, seconds: float) -> dict:
    """First message and bytes per minute for each subscription, side by side on one page."""
    context = signed_in_context(browser, base)
    page = context.new_page()
    page.goto(base + "/?layout=dense")
    page.wait_for_function("document.getElementById('live-state').textContent === 'live'")
    subscriptions = {
        "view=board": "/ws/monitoring/live/?view=board",
        "whole lab": "/ws/monitoring/live/",
    }
    for name, path in subscriptions.items():
        page.evaluate(LISTEN, [path, name])
    page.wait_for_function(
        "[window['view=board'], window['whole lab']].every(t => t.frames.length)"
    )
    hosts, rng, cycles = list(Host.objects.filter(enabled=True)), random.Random(1), 0  # noqa: S311
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        cycle = time.monotonic()
        for no, host in enumerate(hosts, 1):
            if host.status == Host.Status.UP:
                record_probe(host, probe_result(rng, host, no, host.devices.count(), 0.6))
        cycles += 1
        time.sleep(max(0.0, 2.0 - (time.monotonic() - cycle)))  # the loop's 2 s interval
    page.wait_for_timeout(3000)  # the last cycle's push
    elapsed = time.monotonic() - started
    out = {}
    for name in subscriptions:
        frames = page.evaluate(f"window[{name!r}].frames")
        later = frames[1:]
        out[name] = {
            "first": len(frames[0].encode()),
            "first_deflated": deflated(frames[:1]),
            "per_minute": sum(len(f.encode()) for f in later) * 60 / elapsed,
            "per_minute_deflated": (deflated(frames) - deflated(frames[:1])) * 60 / elapsed,
        }
    context.close()
    out["cycles"] = cycles
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=100)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    args = parser.parse_args()
    logging.disable(logging.INFO)  # the demo's audit lines
    call_command("migrate", verbosity=0)
    call_command("collectstatic", "--noinput", verbosity=0)
    seed(hosts=args.hosts, gpus=args.gpus, history_hours=0)
    print(f"load average before: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    port = free_port()
    server = serve(port)
    base = f"http://127.0.0.1:{port}"
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=args.chromium, args=["--no-sandbox"])
            load(browser, base, "/")  # warm the server
            print(
                f"{'board':16} {'HTML KB':>8} {'gzip KB':>8} {'DOM':>6} {'screens':>8} "
                f"{'load ms':>8}"
            )
            for name, path in LAYOUTS.items():
                rows = [load(browser, base, path) for _ in range(3)]
                m = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
                print(
                    f"{name:16} {m['html'] / 1024:8.0f} {m['html_gz'] / 1024:8.0f} {m['dom']:6.0f} "
                    f"{m['screens']:8.1f} {m['load_ms']:8.0f}"
                )
            figures = live(browser, base, args.seconds)
            print(
                f"live, {figures.pop('cycles')} cycles of every host probed again "
                f"in {args.seconds:.0f} s:"
            )
            print(
                f"{'subscription':12} {'first KB':>9} {'deflated':>9} {'KB/min':>8} {'deflated':>9}"
            )
            for name, f in figures.items():
                print(
                    f"{name:12} {f['first'] / 1024:9.1f} {f['first_deflated'] / 1024:9.1f} "
                    f"{f['per_minute'] / 1024:8.0f} {f['per_minute_deflated'] / 1024:9.0f}"
                )
            browser.close()
    finally:
        server.terminate()
        server.wait(timeout=10)
    print(f"load average after: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
