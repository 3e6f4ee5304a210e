"""Several web processes behind the committed nginx site, as deploy/web-processes.sh sets
them up (WEB_PROCESSES=2): two daphnes on consecutive ports, each started with the ExecStart
of deploy/systemd/gpuhive-web@.service for its instance, the upstream file written by the
script itself, the production profile on the test's database and Redis. Pages and websockets
are shared out between the processes, a session made on one is good on the other, and a
message published on the channel layer reaches the dashboards held by each process.
"""

import json
import os
import re
import shlex
import socket
import subprocess
import sys
import time
from urllib.parse import urlsplit

import pytest
from asgiref.sync import async_to_sync
from channels_redis.core import RedisChannelLayer

from monitoring.loop import LIVE_GROUP
from monitoring.models import Host
from tests.realparts import free_port, require

from .conftest import ROOT, Daphne, behind_proxy_env
from .test_nginx import (
    NGINX,
    get,
    nginx_site,
    sign_in,
    upstream_file,
)
from .test_sub_path import cookies

pytestmark = pytest.mark.django_db(transaction=True)

HOST = "gpus.lab.example.org"
# The production profile's Redis; in the embedded run a database of its own (13), so its
# daphnes' task queue and groups never meet those of a production run on the same Redis.
REDIS_URL = os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/13"
UNIT = ROOT / "deploy" / "systemd" / "gpuhive-web@.service"


def unit_command(port: int) -> list[str]:
    """ExecStart of gpuhive-web@<port> (the instance name is the port), run by this venv."""
    text = UNIT.read_text().replace("\\\n", " ")  # continuation lines
    (line,) = (line for line in text.splitlines() if line.startswith("ExecStart="))
    argv = shlex.split(line.removeprefix("ExecStart=").replace("%i", str(port)))
    assert argv[0] == "/opt/gpuhive/.venv/bin/python", argv
    return [sys.executable, *argv[1:]]


def redis_answers() -> bool:
    where = urlsplit(REDIS_URL)
    try:
        socket.create_connection((where.hostname, where.port or 6379), timeout=2).close()
        return True
    except OSError:
        return False


def consecutive_free_ports(count: int) -> int:
    """The first of `count` free consecutive loopback ports (WEB_PORT, WEB_PORT+1, ...)."""
    for _ in range(50):
        base = free_port()
        if base + count > 65535:
            continue
        try:
            for port in range(base, base + count):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
    raise RuntimeError("no run of free ports")


@pytest.fixture(scope="module")
def two_processes(django_db_setup, django_db_blocker, tmp_path_factory):
    """(site, nginx's access log, the two daphnes)."""
    require(NGINX is not None, "nginx is not installed (Debian: apt-get install nginx-light)")
    require(redis_answers(), f"Redis does not answer at {REDIS_URL}")
    workdir = tmp_path_factory.mktemp("web-processes")
    data_dir = workdir / "data"
    env = behind_proxy_env(data_dir, f"https://{HOST}", HOST)
    # The shared channel layer; the dashboards' own poll must not fire during the test.
    env.update(REDIS_URL=REDIS_URL, MONITORING_INTERVAL="300")
    base = consecutive_free_ports(2)
    with django_db_blocker.unblock():
        daphnes = [Daphne(env, port=base, command=unit_command(base))]
        daphnes.append(
            Daphne(env, collect_static=False, port=base + 1, command=unit_command(base + 1))
        )
    try:
        nginx, site = nginx_site(workdir, "root", upstream_file(workdir, base, 2), data_dir)
        try:
            yield site, workdir / "access.log", daphnes
        finally:
            nginx.stop()
    finally:
        for daphne in daphnes:
            daphne.stop()


def upstreams(access_log, request: str, status: int, count: int) -> list[str]:
    """The web processes that answered `request` with `status`, once `count` are logged
    (nginx logs a websocket when it closes)."""
    pattern = re.compile(rf"^{re.escape(request)} {status} (\S+)$", re.MULTILINE)
    deadline = time.monotonic() + 10
    while True:
        found = pattern.findall(access_log.read_text()) if access_log.exists() else []
        if len(found) >= count or time.monotonic() > deadline:
            return found


def test_the_upstream_file_names_each_process(two_processes, tmp_path):
    site, _, daphnes = two_processes
    written = upstream_file(tmp_path, daphnes[0].port, 2).read_text()
    lines = [line for line in written.splitlines() if not line.startswith("#")]
    assert lines == [f"server 127.0.0.1:{d.port};" for d in daphnes]


def test_pages_are_shared_out_and_a_session_is_good_on_both(two_processes, owner):
    site, access_log, daphnes = two_processes
    status, headers = sign_in(site, "owner", "pw-owner-1")
    assert status == 302
    session = f"sessionid={cookies(headers)['sessionid'].value}"
    for _ in range(4):
        status, _, page = get(site, "GET", "/", headers={"Cookie": session})
        assert status == 200 and 'data-ws-path="/ws/monitoring/live/"' in page.decode()
    served = upstreams(access_log, "GET /", 200, 4)
    assert set(served) == {f"127.0.0.1:{d.port}" for d in daphnes}, served


class LiveSocket:
    """The live dashboard's websocket through nginx, read frame by frame (text frames)."""

    def __init__(self, site, cookie):
        key = "MDEyMzQ1Njc4OWFiY2RlZg=="
        request = (
            f"GET /ws/monitoring/live/ HTTP/1.1\r\nHost: {site.host}\r\n"
            f"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
            f"Sec-WebSocket-Version: 13\r\nOrigin: https://{site.host}\r\nCookie: {cookie}\r\n\r\n"
        )
        raw = socket.create_connection(("127.0.0.1", site.https_port), timeout=15)
        self.sock = site.tls_context().wrap_socket(raw, server_hostname=site.host)
        self.file = self.sock.makefile("rb")
        self.sock.sendall(request.encode())
        self.status = self.file.readline().decode().strip()
        while self.file.readline() not in (b"\r\n", b""):
            pass

    def receive_json(self) -> dict:
        while True:
            opcode, length = self.file.read(2)
            length &= 0x7F
            if length == 126:
                length = int.from_bytes(self.file.read(2), "big")
            elif length == 127:
                length = int.from_bytes(self.file.read(8), "big")
            data = self.file.read(length)
            if opcode & 0x0F == 0x01:
                return json.loads(data)

    def close(self):
        self.sock.sendall(b"\x88\x80\x00\x00\x00\x00")  # a masked close frame, no payload
        self.file.close()
        self.sock.close()


def test_a_published_cycle_reaches_dashboards_on_both_processes(two_processes, owner):
    """The probing loop publishes on Redis once per cycle; every process relays it."""
    site, access_log, daphnes = two_processes
    _, headers = sign_in(site, "owner", "pw-owner-1")
    cookie = f"sessionid={cookies(headers)['sessionid'].value}"
    sockets = [LiveSocket(site, cookie), LiveSocket(site, cookie)]  # round robin: one each
    try:
        for ws in sockets:
            assert ws.status.startswith("HTTP/1.1 101 "), ws.status
            assert "node-new" not in json.dumps(ws.receive_json())  # the snapshot on connect
        Host.objects.create(name="node-new", address="127.0.0.9")
        layer = RedisChannelLayer(hosts=[REDIS_URL])
        async_to_sync(layer.group_send)(LIVE_GROUP, {"type": "cycle.finished"})
        for ws in sockets:  # within the socket timeout (15 s), far below the 300 s poll
            pushed = ws.receive_json()
            assert [h["name"] for h in pushed["hosts"]] == ["node-new"], pushed
    finally:
        for ws in sockets:
            ws.close()
    served = upstreams(access_log, "GET /ws/monitoring/live/", 101, 2)
    assert set(served) == {f"127.0.0.1:{d.port}" for d in daphnes}, served


@pytest.mark.parametrize("count, port", [("0", "8000"), ("two", "8000"), ("2", "65535")])
def test_a_bad_count_or_port_is_refused_and_writes_nothing(tmp_path, count, port):
    env_file, upstream = tmp_path / "hive.env", tmp_path / "gpuhive-upstream.conf"
    env_file.write_text(f"WEB_PROCESSES={count}\nWEB_PORT={port}\n")
    env = {**os.environ, "HIVE_ENV_FILE": str(env_file), "HIVE_NGINX_UPSTREAM": str(upstream)}
    script = ROOT / "deploy" / "web-processes.sh"
    done = subprocess.run(
        [str(script), "--upstream-only"], env=env, capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 2
    assert "WEB_PROCESSES must be a count >= 1 and WEB_PORT a port" in done.stderr
    assert not upstream.exists()
