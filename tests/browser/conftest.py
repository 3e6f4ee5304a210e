"""Browser tests: a real Chromium (Debian's) driven by Playwright against live_server.

Sync Playwright keeps an asyncio loop in the main thread for the whole session, which
breaks async_to_sync in the other tests, so bin/test runs this directory in its own
pytest process (`-m browser`). Every test collected here carries the marker.
"""

import os
import re
import shutil
from pathlib import Path

import pytest

from tests import leftovers
from tests.realparts import require

CHROMIUM = os.environ.get("HIVE_CHROMIUM", "/usr/bin/chromium")


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/browser/" in str(item.fspath).replace(os.sep, "/"):
            item.add_marker(pytest.mark.browser)


@pytest.fixture(scope="session")
def chromium():
    require(shutil.which(CHROMIUM) is not None, f"Chromium not found at {CHROMIUM}")
    playwright_api = pytest.importorskip("playwright.sync_api")
    # The test body talks to the ORM while Playwright's loop runs in the same thread; the
    # ORM calls are ordinary blocking ones, so Django's async guard has nothing to protect.
    # Set only while a browser runs: collecting this file must not change other tests.
    mp = pytest.MonkeyPatch()
    mp.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with playwright_api.sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=CHROMIUM, args=["--no-sandbox", "--disable-dev-shm-usage"]
        )
        keep_browser_processes()
        yield browser
        browser.close()
    mp.undo()


def keep_browser_processes() -> None:
    """Chromium starts helper processes whenever it needs one (a utility service in the
    middle of some test): they are the session browser's, not the test's (tests/leftovers)."""
    table = leftovers.processes()
    for pid in leftovers.descendants(os.getpid(), table):
        if "playwright" in table[pid].args and "driver" in table[pid].args:
            leftovers.keep_tree(pid)


# Screenshots of failed browser tests are kept here (CI keeps the folder as an artefact).
ARTEFACTS = Path(os.environ.get("HIVE_BROWSER_ARTEFACTS", "test-results/browser")).resolve()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    setattr(item, f"report_{report.when}", report)
    return report


@pytest.fixture
def page(chromium, request):
    context = chromium.new_context(viewport={"width": 1400, "height": 900}, locale="en-GB")
    context.set_default_timeout(10_000)
    page = context.new_page()
    yield page
    keep_screenshot_if_failed(request.node, page)
    context.close()


def keep_screenshot_if_failed(item, page):
    report = getattr(item, "report_call", None)
    if report is None or not report.failed:
        return
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    target = ARTEFACTS / (re.sub(r"[^\w.-]+", "_", item.nodeid)[-150:] + ".png")
    try:
        page.screenshot(path=str(target), full_page=True)
    except Exception as error:  # noqa: BLE001 - a closed page must not hide the failure
        print(f"no screenshot of {item.nodeid}: {error}")
        return
    print(f"screenshot of the failed test: {target}")


@pytest.fixture
def login(page, live_server):
    """login(username, password): sign in through the real login form."""

    def sign_in(username, password):
        page.goto(f"{live_server.url}/accounts/login/")
        page.fill("input[name=username]", username)
        page.fill("input[name=password]", password)
        page.click("[type=submit]")
        page.wait_for_load_state()
        assert "/accounts/login/" not in page.url, "login failed"
        return page

    return sign_in


# --- The web server we ship, for pages that need websockets (the live dashboard) ----------
# pytest-django's live_server speaks WSGI only. This one runs the project's ASGI application
# in a forked process on the same test database, as production's web process runs apart from
# the workers: with no Redis, what it pushes must reach it through the database.
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler  # noqa: E402

# The real sshd and fake GPUs of the monitoring tests, for browser tests of live data.
from tests.monitoring.conftest import fake_gpu_root, gpus, sshd  # noqa: E402, F401
from tests.webserver import shipped_server  # noqa: E402


@pytest.fixture(scope="session")
def asgi_live_server(django_db_setup, django_db_blocker):
    """The URL of the web server we ship, serving HTTP and websockets on the test database."""
    with shipped_server(ASGIStaticFilesHandler, setup=django_db_blocker.unblock) as url:
        yield url
