"""The committed nginx site, run by the real nginx over real TLS in front of a real daphne.

deploy/nginx/gpuhive.conf is read as committed and only what must differ in a test is
substituted (see `site_config`), so a syntax error, a directive this nginx lacks, a missing
header or a missing websocket upgrade there fails here. Both variants run: the site at the
root (https://gpus.lab.example.org/) and the commented sub-path block
(https://lab.example.org/gpus/) placed in the committed TLS server block instead of its own
locations.
"""

import datetime
import http.client
import ipaddress
import os
import re
import shutil
import socket
import ssl
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.realparts import free_port, require

from .conftest import PUBLIC_HOST, ROOT, Daphne, behind_proxy_env, login_form_headers
from .test_sub_path import cookies

pytestmark = pytest.mark.django_db(transaction=True)

CONF = ROOT / "deploy" / "nginx" / "gpuhive.conf"
NGINX = shutil.which("nginx") or next(
    (p for p in ("/usr/sbin/nginx", "/usr/local/sbin/nginx") if Path(p).exists()), None
)
SUB_PATH_HEADING = "# --- Under a sub-path instead"
# The variants: (host the site answers as, URL prefix).
VARIANTS = {"root": ("gpus.lab.example.org", ""), "sub-path": (PUBLIC_HOST, "/gpus")}
HSTS = "max-age=31536000; includeSubDomains; preload"


def site_config(variant, *, host, http_port, https_port, upstream, cert, key, static):
    """deploy/nginx/gpuhive.conf with only what a test must change, each a checked substitution:
    the listen ports (loopback IPv4, free ports; the IPv6 lines are dropped), the upstream
    file's path (`upstream_file`: written by deploy/web-processes.sh), the certificate
    (self-signed), the static alias (daphne's data dir) and server_name. For "sub-path", the
    commented block under SUB_PATH_HEADING, uncommented, replaces the locations of the TLS
    server block (the lab's existing server in the comment)."""
    text = CONF.read_text()
    substitutions = [
        (r"listen 80;", f"listen 127.0.0.1:{http_port};"),
        (r"listen 443 ", f"listen 127.0.0.1:{https_port} "),  # keeps "ssl http2;"
        (r"\n *listen \[::\]:\d+[^;]*;", ""),
        (re.escape("include /etc/nginx/gpuhive-upstream.conf;"), f"include {upstream};"),
        (re.escape("/etc/letsencrypt/live/gpus.lab.example.org/fullchain.pem"), str(cert)),
        (re.escape("/etc/letsencrypt/live/gpus.lab.example.org/privkey.pem"), str(key)),
        (re.escape("/var/lib/gpuhive/staticfiles/"), f"{static}/"),
        (re.escape("server_name gpus.lab.example.org;"), f"server_name {host};"),
    ]
    for pattern, new in substitutions:
        text, count = re.subn(pattern, lambda _, new=new: new, text)
        assert count, f"{pattern!r} is no longer in {CONF}: update the substitutions"
    active, heading, commented = text.partition(SUB_PATH_HEADING)
    assert heading, f"{SUB_PATH_HEADING!r} is no longer in {CONF}"
    if variant == "root":
        return active
    sub_path = "".join(" " + line[1:] for line in commented.splitlines(True) if line[:4] == "#   ")
    assert "location /gpus/" in sub_path, "the sub-path block has no location /gpus/"
    locations = re.compile(r"^    location .*?^    \}\n", re.MULTILINE | re.DOTALL)
    first = locations.search(active).start()
    active = locations.sub("", active)
    return active[:first] + sub_path + active[first:]


WEB_PROCESSES = ROOT / "deploy" / "web-processes.sh"


def upstream_file(workdir: Path, base_port: int, count: int) -> Path:
    """nginx's upstream servers as deploy/web-processes.sh writes them for WEB_PROCESSES=count
    and WEB_PORT=base_port (its --upstream-only mode: no systemctl, no nginx reload)."""
    env_file, upstream = workdir / "hive.env", workdir / "gpuhive-upstream.conf"
    env_file.write_text(f"WEB_PROCESSES={count}\nWEB_PORT={base_port}\n")
    env = {**os.environ, "HIVE_ENV_FILE": str(env_file), "HIVE_NGINX_UPSTREAM": str(upstream)}
    subprocess.run([str(WEB_PROCESSES), "--upstream-only"], env=env, check=True, timeout=30)
    return upstream


def nginx_conf(workdir: Path, site: Path) -> str:
    """A minimal main config: every path nginx writes under workdir, the site included."""
    user = "user root;\n" if os.geteuid() == 0 else ""  # workers must read the tmp dirs
    temp = "".join(
        f"    {kind}_temp_path {workdir}/{kind}_temp;\n"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    return f"""{user}worker_processes 1;
pid {workdir}/nginx.pid;
error_log {workdir}/error.log info;
events {{ worker_connections 64; }}
http {{
    include /etc/nginx/mime.types;
    default_type application/octet-stream;
    # Which web process answered each request ($upstream_addr), for the tests that run several.
    log_format upstreams '$request_method $request_uri $status $upstream_addr';
    access_log {workdir}/access.log upstreams;
{temp}    include {site};
}}
"""


def self_signed(workdir: Path, host: str) -> tuple[Path, Path]:
    """A certificate for host and 127.0.0.1, its own issuer; the clients trust exactly it."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)])
    now = datetime.datetime.now(datetime.UTC)
    names = [x509.DNSName(host), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = workdir / "cert.pem", workdir / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


@dataclass
class Site:
    host: str
    prefix: str
    http_port: int
    https_port: int
    cert: Path
    static: Path

    def tls_context(self) -> ssl.SSLContext:
        """Verifies nginx's certificate against the test's own (no ALPN: HTTP/1.1)."""
        return ssl.create_default_context(cafile=str(self.cert))


class Nginx:
    """nginx in the foreground (`-g 'daemon off;'`) with its prefix, config and logs in workdir."""

    def __init__(self, workdir: Path, conf: Path, ports: list[int]):
        argv = [NGINX, "-p", f"{workdir}/", "-c", str(conf), "-e", str(workdir / "error.log")]
        self.log = workdir / "error.log"
        checked = subprocess.run([*argv, "-t"], capture_output=True, text=True, timeout=30)
        assert checked.returncode == 0, f"nginx -t refuses {CONF}:\n{checked.stderr}"
        self.proc = subprocess.Popen([*argv, "-g", "daemon off;"], stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 15
        for port in ports:
            while True:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"nginx exited:\n{self.log.read_text()}")
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        self.stop()
                        raise RuntimeError("nginx did not start listening") from None
                    time.sleep(0.05)

    def stop(self):
        self.proc.terminate()  # SIGTERM: fast shutdown, workers included
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def nginx_site(workdir: Path, variant: str, upstream: Path, data_dir: Path):
    """nginx running the committed site (``variant``: "root" or "sub-path") in front of the
    web processes in ``upstream``; (the running Nginx, the Site to ask). Stop the Nginx."""
    host, prefix = VARIANTS[variant]
    cert, key = self_signed(workdir, host)
    http_port, https_port = free_port(), free_port()
    site_file = workdir / "gpuhive.conf"
    static = data_dir / "staticfiles"
    site_file.write_text(
        site_config(
            variant,
            host=host,
            http_port=http_port,
            https_port=https_port,
            upstream=upstream,
            cert=cert,
            key=key,
            static=static,
        )
    )
    conf = workdir / "nginx.conf"
    conf.write_text(nginx_conf(workdir, site_file))
    nginx = Nginx(workdir, conf, [http_port, https_port])
    return nginx, Site(host, prefix, http_port, https_port, cert, static)


@pytest.fixture(scope="module", params=list(VARIANTS))
def site(request, django_db_setup, django_db_blocker, tmp_path_factory):
    """daphne with the production profile behind nginx running the committed site."""
    require(NGINX is not None, "nginx is not installed (Debian: apt-get install nginx-light)")
    host, prefix = VARIANTS[request.param]
    workdir = tmp_path_factory.mktemp(f"nginx-{request.param}")
    data_dir = workdir / "data"
    env = behind_proxy_env(data_dir, f"https://{host}{prefix}", host)
    with django_db_blocker.unblock():
        daphne = Daphne(env)
    try:
        upstream = upstream_file(workdir, daphne.port, 1)
        nginx, site = nginx_site(workdir, request.param, upstream, data_dir)
        try:
            yield site
        finally:
            nginx.stop()
    finally:
        daphne.stop()


def get(site, method, path, body=None, headers=None, https=True):
    """One request to nginx as a browser sends it; returns (status, headers, body bytes)."""
    if https:
        conn = http.client.HTTPSConnection(
            "127.0.0.1", site.https_port, timeout=15, context=site.tls_context()
        )
    else:
        conn = http.client.HTTPConnection("127.0.0.1", site.http_port, timeout=15)
    try:
        conn.request(method, path, body=body, headers={"Host": site.host, **(headers or {})})
        response = conn.getresponse()
        return response.status, response.headers, response.read()
    finally:
        conn.close()


def sign_in(site, username, password):
    """Through the login form, with the CSRF token from the page; returns the POST's answer."""
    login = f"{site.prefix}/accounts/login/"
    status, headers, page = get(site, "GET", login)
    assert status == 200, f"GET {login}: {status}"
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.decode()).group(1)
    status, headers, _ = get(
        site,
        "POST",
        login,
        body=f"username={username}&password={password}&csrfmiddlewaretoken={token}",
        headers=login_form_headers(site.host, login, cookies(headers)["csrftoken"].value),
    )
    return status, headers


def test_plain_http_is_redirected_to_https_by_nginx(site):
    path = f"{site.prefix}/accounts/login/?next=/x"
    status, headers, _ = get(site, "GET", path, https=False)
    assert status == 301
    assert headers["Location"] == f"https://{site.host}{path}"
    assert headers["Server"].startswith("nginx")


def test_the_site_speaks_http2_and_tls(site):
    tls = site.tls_context()
    tls.set_alpn_protocols(["h2", "http/1.1"])
    raw = socket.create_connection(("127.0.0.1", site.https_port), timeout=15)
    with tls.wrap_socket(raw, server_hostname=site.host) as sock:
        assert sock.selected_alpn_protocol() == "h2"
        assert sock.version() in ("TLSv1.2", "TLSv1.3")


def test_the_login_page_comes_from_django_as_https(site):
    """200, not Django's own http->https redirect: X-Forwarded-Proto got through."""
    status, headers, page = get(site, "GET", f"{site.prefix}/accounts/login/")
    assert status == 200
    assert headers["Strict-Transport-Security"] == HSTS
    assert f'action="{site.prefix}/accounts/login/"' in page.decode()
    csrf = cookies(headers)["csrftoken"]
    assert csrf["secure"] and csrf["path"] == (site.prefix or "/")


def test_signing_in_lands_on_the_dashboard(site, owner):
    status, headers = sign_in(site, "owner", "pw-owner-1")
    assert (status, headers["Location"]) == (302, f"{site.prefix}/")
    session = cookies(headers)["sessionid"]
    assert session["secure"] and session["httponly"] and session["path"] == (site.prefix or "/")
    status, _, page = get(
        site, "GET", f"{site.prefix}/", headers={"Cookie": f"sessionid={session.value}"}
    )
    assert status == 200
    assert f'data-ws-path="{site.prefix}/ws/monitoring/live/"' in page.decode()


def test_static_files_are_served_by_nginx_from_disk(site):
    status, headers, body = get(site, "GET", f"{site.prefix}/static/css/hive.css")
    assert status == 200 and headers["Content-Type"].startswith("text/css")
    assert body == (site.static / "css" / "hive.css").read_bytes()
    # A file that appeared after daphne started: whitenoise does not know it, nginx serves it.
    (site.static / "nginx-probe.txt").write_text("from disk\n")
    status, headers, body = get(site, "GET", f"{site.prefix}/static/nginx-probe.txt")
    assert (status, body) == (200, b"from disk\n")
    assert "max-age=604800" in headers["Cache-Control"]  # the site's `expires 7d`


def websocket(site, cookie=""):
    """Open the live websocket through nginx; returns the status line and, once upgraded,
    whether a ping sent through the tunnel comes back as a pong."""
    key = "MDEyMzQ1Njc4OWFiY2RlZg=="
    request = (
        f"GET {site.prefix}/ws/monitoring/live/ HTTP/1.1\r\nHost: {site.host}\r\n"
        f"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
        f"Sec-WebSocket-Version: 13\r\nOrigin: https://{site.host}\r\nCookie: {cookie}\r\n\r\n"
    )
    raw = socket.create_connection(("127.0.0.1", site.https_port), timeout=15)
    with (
        site.tls_context().wrap_socket(raw, server_hostname=site.host) as sock,
        sock.makefile("rb") as f,
    ):
        sock.sendall(request.encode())
        status = f.readline().decode().strip()
        while f.readline() not in (b"\r\n", b""):
            pass
        if " 101 " not in status + " ":
            return status, False
        mask = b"\x01\x02\x03\x04"
        payload = bytes(b ^ mask[i % 4] for i, b in enumerate(b"hive"))
        sock.sendall(b"\x89\x84" + mask + payload)  # a masked ping, "hive"
        while True:  # skip any snapshot the consumer sends first
            opcode, length = f.read(2)
            length &= 0x7F
            if length == 126:
                length = int.from_bytes(f.read(2), "big")
            elif length == 127:
                length = int.from_bytes(f.read(8), "big")
            data = f.read(length)
            if opcode & 0x0F == 0x0A:
                return status, data == b"hive"


def test_the_live_websocket_is_upgraded_through_nginx(site, owner):
    _, headers = sign_in(site, "owner", "pw-owner-1")
    status, pong = websocket(site, f"sessionid={cookies(headers)['sessionid'].value}")
    assert status.startswith("HTTP/1.1 101 ") and pong, status
    # Anonymous visitors are refused before the handshake completes.
    status, _ = websocket(site)
    assert not status.startswith("HTTP/1.1 101 "), status
