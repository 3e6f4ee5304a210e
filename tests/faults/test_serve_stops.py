"""`serve` started and stopped as a user does: the first probe is there as soon as the page
is, and Ctrl-C (SIGINT), SIGTERM or a closed terminal (SIGHUP) stops the web app and every
worker process, within 15 s, before `serve` returns. Before, `serve` waited for the cluster's
top process only, and qcluster workers went on probing for 30-180 s with their parent gone."""

import re
import signal
import time

import httpx
import pytest
from django.conf import settings as django_settings
from django.utils import timezone

from monitoring.models import Host, WorkerCluster
from tests.faults.supervised import (
    Service,
    answers,
    fake_local_gpus,
    service,
    session_members,
    until,
)
from tests.security.conftest import free_port

pytestmark = pytest.mark.django_db(transaction=True)

INTERVAL = 2.0  # the default MONITORING_INTERVAL


@pytest.fixture
def serve(tmp_path):
    Host.objects.create(name="localhost", address="localhost", transport=Host.Transport.LOCAL)
    gpu_root = tmp_path / "gpus"
    fake_local_gpus(gpu_root)
    port = free_port()
    env = service(tmp_path / "data", gpu_root, MONITORING_INTERVAL=str(INTERVAL))
    server = Service(["serve", "--port", str(port)], env, tmp_path / "serve.log")
    server.url = f"http://127.0.0.1:{port}"
    yield server
    server.kill_all()


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_serve_probes_at_once_and_stops_every_process_before_it_returns(serve, signum):
    started = timezone.now()
    until(lambda: answers(f"{serve.url}/accounts/login/"), 90, "the web app answers", serve)
    web_up = timezone.now()
    seen = until(
        lambda: Host.objects.values_list("last_seen", flat=True).get(name="localhost"),
        2 * INTERVAL,
        "a probe stored within two intervals of the page answering",
        serve,
    )
    print(
        f"\nweb up {(web_up - started).total_seconds():.1f}s after start, first probe "
        f"{(seen - started).total_seconds():.1f}s after start"
    )
    until(lambda: len(serve.workers()) == 3, 60, "the workers are up", serve)
    tree = serve.tree()
    assert len(tree) >= 7, tree  # serve, daphne, the cluster's sentinel, monitor, pusher, workers

    took = serve.signal(signum)

    left = [pid for pid in tree if pid in set(session_members(serve.proc.pid))]
    assert left == [], f"left running: {left}\n{serve.tail()}"
    assert serve.proc.returncode == 0, serve.tail()
    # How long it took is a figure for bench/serve_start_stop.py, not an assertion: what is
    # asserted is that nothing is left when it returns (SIGKILL after the grace ensures it).
    assert "Stopped." in serve.tail()
    assert WorkerCluster.objects.get().stopped_at is not None
    print(f"{signal.Signals(signum).name}: serve returned after {took:.1f}s, nothing left")


def test_the_console_is_quiet_at_the_default_verbosity(serve, tmp_path, owner):
    """No line per task: django-q2 speaks at WARNING; the supervisor's summary is once a
    minute. No line per page either (no access log by default), and mail goes to a file in
    the data directory, not the console."""
    until(lambda: len(serve.workers()) == 3, 90, "the workers are up", serve)
    # The web server is a process of its own and may listen after the workers are up.
    until(lambda: answers(f"{serve.url}/accounts/login/"), 90, "the web app answers", serve)
    with httpx.Client(base_url=serve.url, timeout=10) as browser:
        for _ in range(5):
            assert browser.get("/accounts/login/").status_code == 200
        assert browser.get("/favicon.ico").headers["location"] == "/static/img/hive.svg"
        reset_password(browser, owner.email)
    time.sleep(6 * INTERVAL)  # a few cycles, each queueing tasks
    serve.signal(signal.SIGINT)
    out = serve.tail(200)
    assert "processing" not in out and "Enqueued" not in out, out
    assert "/accounts/login/" not in out and "/favicon.ico" not in out, out
    assert "Password reset" not in out and owner.email not in out, out
    assert len(out.splitlines()) < 20, out
    assert django_settings.Q_LOG_LEVEL == "WARNING"
    assert "Mail is not sent: each one is a file in" in out  # said once, at the start
    mails = [path.read_text() for path in (tmp_path / "data" / "mail").iterdir()]
    assert len(mails) == 1 and f"To: {owner.email}" in mails[0], mails


def reset_password(browser, email: str) -> None:
    """Asks for a password-reset mail through the form, as a person does."""
    page = browser.get("/accounts/password_reset/").text
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)[1]
    form = {"email": email, "csrfmiddlewaretoken": token}
    answer = browser.post("/accounts/password_reset/", data=form)
    assert answer.status_code == 302, answer.text
