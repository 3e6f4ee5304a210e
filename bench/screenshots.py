"""Screenshots of the pages for the manual (README.md, docs/using.md), at desktop and phone
widths, from a running service seeded with `manage.py demo` (Playwright driving Debian's
Chromium).

    .venv/bin/python manage.py demo
    bin/serve &                                   # or any running instance
    .venv/bin/python bench/screenshots.py http://127.0.0.1:8000 --out docs/screenshots
"""

import argparse
import sys
from pathlib import Path

from playwright.sync_api import sync_playwright

PAGES = {
    "board": "/",
    "calendar": "/reservations/calendar/",
    "timeline": "/reservations/timeline/",
    "host": "/hosts/demo-001/",
    "jobs-new": "/jobs/new/",
    "jobs-grid": "/jobs/new/?where=devices",
    "queue": "/queue/",
    "mine": "/reservations/mine/",
    "usage": "/usage/",
    "idle": "/fairuse/idle/",
    "notifications": "/notifications/",
    "overview": "/reservations/overview/",
}
WIDTHS = {"desktop": (1280, 900), "phone": (390, 844)}


def fill_sweep(page) -> None:
    """The New job form as a newcomer fills it for a sweep on GPUs of their choice: a free GPU
    they may start on ticked, values typed, the preview shown (the screenshot is taken at the
    picker and preview)."""
    page.fill("#id_name", "lr sweep")
    page.fill("#id_template", "python train.py --lr {lr} --batch {batch}")
    # Hosts are folded in the picker; open them so a free GPU can be ticked.
    page.evaluate(
        "document.querySelectorAll('#gpu-picker details').forEach(d => { d.open = true; })"
    )
    page.locator(".gpu-pick.gt-free:has(.gt-usable[data-usable='1']) input").first.check()
    page.fill("#id_values", "lr: 0.1, 0.01, 0.001\nbatch: 32, 64")
    page.locator("#preview-count").filter(has_text="6 tasks").wait_for()
    page.locator("#id_samples").focus()  # the preview in view, no textarea outline
    page.evaluate("window.scrollTo(0, document.getElementById('gpu-picker').offsetTop)")


# Pages to fill in before the screenshot, by name.
ACTIONS = {"jobs-grid": fill_sweep}


def sign_in(page, base: str, user: str, password: str) -> None:
    page.goto(f"{base}/accounts/login/")
    page.fill("input[name=username]", user)
    page.fill("input[name=password]", password)
    page.click("[type=submit]")
    page.wait_for_load_state()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base", help="the service's URL, e.g. http://127.0.0.1:8000")
    parser.add_argument("--user", default="ada")
    parser.add_argument("--password", default="demo-password")
    parser.add_argument("--out", default="docs/screenshots", type=Path)
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--scheme", choices=["light", "dark"], default="light")
    parser.add_argument("--only", nargs="*", help="page names to take")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=args.chromium, args=["--no-sandbox"])
        for width_name, (width, height) in WIDTHS.items():
            context = browser.new_context(
                viewport={"width": width, "height": height},
                color_scheme=args.scheme,
                locale="en-GB",
            )
            page = context.new_page()
            sign_in(page, args.base, args.user, args.password)
            for name, path in PAGES.items():
                if args.only and name not in args.only:
                    continue
                page.goto(args.base + path)
                page.wait_for_load_state("networkidle")
                if name in ACTIONS:
                    ACTIONS[name](page)
                target = (
                    args.out / f"{name}-{width_name}{'-dark' if args.scheme == 'dark' else ''}.png"
                )
                page.screenshot(path=str(target))
                print(target)
            context.close()
        browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
