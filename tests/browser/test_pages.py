"""Every page at desktop and phone widths, on a seeded demo lab, served by a real daphne
(websockets included): no sideways scrolling of the page, no console error, and axe-core
(vendored, injected) finds no serious or critical accessibility violation."""

from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from board.demo import PASSWORD, seed
from jobs.models import Job
from monitoring.models import Host

pytestmark = pytest.mark.django_db(transaction=True)

AXE = Path(__file__).parent / "vendor" / "axe-core-4.14.1" / "axe.min.js"
WIDTHS = {"desktop": (1280, 900), "phone": (390, 844)}
PAGES = [
    "/",
    "/hosts/demo-001/",
    "/reservations/calendar/",
    "/reservations/overview/",
    "/reservations/mine/",
    "/access/week/",
    "/access/profile/",
    "/protection/",
    "/jobs/",
    "/jobs/new/",
    "/jobs/new/?where=devices&when=at",  # the GPU picker and the start time shown
    "/jobs/new/rows/",
    "/jobs/new/distributed/",
    "/jobs/{job}/",
    "/queue/",
    "/account/tokens/",
    "/usage/",
    "/fairuse/idle/",
    "/notifications/",
    "/reservations/usage/",  # refused to a member: the 403 page
    "/no/such/page/",  # the 404 page
]
ADMIN_PAGES = ["/reservations/usage/", "/usage/", "/access/week/?user=1"]
ANONYMOUS_PAGES = ["/accounts/login/"]


@pytest.fixture
def demo_lab(db):
    seed(hosts=3, gpus=4, history_hours=1, down=1)
    get_user_model().objects.create_superuser("boss", "boss@example.org", PASSWORD)
    return {"job": Job.objects.first().pk if Job.objects.exists() else 0}


def open_as(page, base, user, width):
    page.set_viewport_size(dict(zip(("width", "height"), WIDTHS[width], strict=True)))
    errors = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    if user:
        page.goto(f"{base}/accounts/login/")
        page.fill("input[name=username]", user)
        page.fill("input[name=password]", PASSWORD)
        page.click("[type=submit]")
        page.wait_for_load_state()
    return errors


# EventCalendar's own markup gives its whole widget (toolbar included) role=table, so the
# table's required children cannot hold there; every other rule runs on it too.
AXE_OPTIONS = """{resultTypes: ["violations"],
  rules: {"aria-required-children": {enabled: !document.querySelector(".ec")}}}"""


def check(page, url, errors):
    page.goto(url)
    page.wait_for_load_state("load")
    page.wait_for_timeout(300)  # scripts that draw after load (calendar, live board)
    overflow = page.evaluate(
        "document.documentElement.scrollWidth - document.documentElement.clientWidth"
    )
    page.add_script_tag(path=str(AXE))
    violations = page.evaluate(
        f"""async () => (await axe.run(document, {AXE_OPTIONS})).violations
            .filter(v => v.impact === "serious" || v.impact === "critical")
            .map(v => v.id + ": " + v.nodes.slice(0, 3).map(n => n.target.join(" ")).join(", "))"""
    )
    return {"overflow": overflow, "axe": violations, "console": [e for e in errors if e]}


def expect_clean(result, url):
    # A refused or missing page answers 403/404, which the browser logs as a console error
    # about the document itself; nothing else may be logged.
    console = [e for e in result["console"] if "status of 40" not in e]
    assert result["overflow"] == 0, f"{url} scrolls sideways by {result['overflow']} px"
    assert result["axe"] == [], f"{url}: {result['axe']}"
    assert console == [], f"{url}: {console}"


@pytest.mark.parametrize("width", WIDTHS)
def test_every_page_is_clean_at_this_width(asgi_live_server, demo_lab, page, width):
    errors = open_as(page, asgi_live_server, "ada", width)
    for path in PAGES:
        url = asgi_live_server + path.format(**demo_lab)
        expect_clean(check(page, url, errors), url)
        errors.clear()


@pytest.mark.parametrize("width", WIDTHS)
def test_admin_and_anonymous_pages_are_clean_at_this_width(
    asgi_live_server, demo_lab, page, chromium, width
):
    errors = open_as(page, asgi_live_server, "boss", width)
    for path in ADMIN_PAGES:
        expect_clean(check(page, asgi_live_server + path, errors), path)
    anonymous = chromium.new_context(locale="en-GB").new_page()
    errors = open_as(anonymous, asgi_live_server, None, width)
    for path in ANONYMOUS_PAGES:
        expect_clean(check(anonymous, asgi_live_server + path, errors), path)
    anonymous.context.close()


@pytest.mark.parametrize("width", WIDTHS)
def test_a_job_and_its_log_are_clean_for_their_owner(asgi_live_server, demo_lab, page, width):
    """The pages that follow a job live from the API (its tasks' states, the log)."""
    job = Job.objects.get(pk=demo_lab["job"])
    errors = open_as(page, asgi_live_server, job.owner.username, width)
    for path in (f"/jobs/{job.pk}/", f"/jobs/tasks/{job.tasks.first().pk}/log/"):
        expect_clean(check(page, asgi_live_server + path, errors), path)
        errors.clear()
    assert page.inner_text("#status") == "running"  # read from the API's log answer


def test_the_demo_lab_has_a_down_host_and_a_running_job(demo_lab):
    assert Host.objects.exclude(status=Host.Status.UP).count() == 1
    assert demo_lab["job"]
