"""The service's private SSH key never leaves the data directory: not in admin pages, not in
API answers, not in logs or the audit log, not in what `sshkey` prints."""

import logging
import re
import subprocess
from io import StringIO

import pytest
from django.contrib import admin
from django.core.management import call_command
from django.urls import NoReverseMatch, reverse

from accesscontrol.models import Ban, Grant
from audit.models import AuditEvent
from monitoring.inventory import probe_and_record
from monitoring.keys import service_key_path
from monitoring.models import Device, Host
from tests.realparts import Sshd, require, sshd_available

pytestmark = pytest.mark.django_db


@pytest.fixture
def key_material():
    """Pieces of the private key a leak would show: each base64 line and the whole body."""
    path = service_key_path()
    lines = [line for line in path.read_text().splitlines() if not line.startswith("-----")]
    return [*lines, "".join(lines)]


def assert_no_key(text, key_material, where):
    leaked = [piece for piece in key_material if piece in text]
    assert not leaked, f"private key material in {where}"


@pytest.fixture
def inventory(admin_user, owner):
    host = Host.objects.create(
        name="node-1",
        address="10.0.0.1",
        host_key_type="ssh-ed25519",
        host_key="AAAAC3NzaC1lZDI1NTE5AAAAIHostKeyOfNode1",
        host_key_fingerprint="SHA256:abc",
        last_error="authentication failed for monitor@10.0.0.1",
    )
    Device.objects.create(host=host, index=0, uuid="GPU-1", name="Tesla T4")
    grant = Grant.objects.create(name="students", created_by=admin_user)
    grant.users.add(owner)
    Ban.objects.create(user=owner, reason="ran on a reserved GPU", created_by=admin_user)
    return host


def admin_urls(objects_by_model):
    """Changelist, add and first change page of every model registered in the admin."""
    for model in admin.site._registry:
        opts = model._meta
        for name, args in (("changelist", []), ("add", [])):
            yield reverse(f"admin:{opts.app_label}_{opts.model_name}_{name}", args=args)
        first = model._default_manager.order_by("pk").first()
        if first is not None:
            try:
                yield reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[first.pk])
            except NoReverseMatch:
                continue


def test_admin_pages_never_show_the_private_key(client, admin_user, inventory, key_material):
    client.force_login(admin_user)
    pages = [reverse("admin:index"), *admin_urls(None)]
    for url in pages:
        response = client.get(url)
        assert response.status_code in (200, 403), url
        assert_no_key(response.content.decode(), key_material, url)
    assert len(pages) > 20  # every registered model was visited


def api_urls(client):
    """Every list endpoint of the API root, and the first object of each."""
    for url in client.get("/api/", HTTP_ACCEPT="application/json").json().values():
        yield url
        response = client.get(url, HTTP_ACCEPT="application/json")
        is_json = response.get("Content-Type", "").startswith("application/json")
        body = response.json() if response.status_code == 200 and is_json else None
        rows = body.get("results", []) if isinstance(body, dict) else body or []
        if rows and isinstance(rows[0], dict) and "id" in rows[0]:
            yield f"{url.rstrip('/')}/{rows[0]['id']}/"


@pytest.mark.parametrize("who", ["owner", "boss"])
def test_api_answers_never_carry_the_private_key(client, inventory, key_material, who):
    client.login(username=who, password={"owner": "pw-owner-1", "boss": "pw-boss-1"}[who])
    urls = list(api_urls(client))
    for url in urls:
        response = client.get(url, HTTP_ACCEPT="application/json")
        assert response.status_code < 500, url
        assert_no_key(response.content.decode(), key_material, url)
    assert any("/api/hosts/" in url for url in urls)


def test_sshkey_prints_only_the_public_key(key_material):
    out = StringIO()
    call_command("sshkey", stdout=out)
    assert_no_key(out.getvalue(), key_material, "manage.py sshkey")
    assert re.match(r"ssh-ed25519 \S+", out.getvalue().strip())


def test_a_refused_login_on_a_host_logs_no_key(tmp_path, caplog, key_material, settings):
    """paramiko loads and offers the key here; neither the logs nor the audit log show it."""
    require(sshd_available(), "OpenSSH server (/usr/sbin/sshd) is not installed")
    stranger = tmp_path / "stranger"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(stranger)], check=True)
    sshd = Sshd(tmp_path / "sshd", stranger.with_suffix(".pub").read_text(), tmp_path).start()
    settings.SSH_CONNECT_TIMEOUT = 3
    try:
        user = subprocess.run(["id", "-un"], capture_output=True, text=True).stdout.strip()
        host = Host.objects.create(name="h", address="127.0.0.1", port=sshd.port, username=user)
        caplog.set_level(logging.DEBUG)
        caplog.set_level(logging.DEBUG, logger="paramiko")
        probe_and_record(host)
    finally:
        sshd.stop()
    host.refresh_from_db()
    assert host.status == Host.Status.AUTH_FAILED
    assert caplog.records  # paramiko talked at DEBUG: there was something to leak
    assert_no_key(caplog.text + host.last_error, key_material, "logs")
    details = str(list(AuditEvent.objects.values_list("detail", flat=True)))
    assert_no_key(details, key_material, "audit log")


def test_the_private_key_is_readable_by_the_service_only():
    assert service_key_path().stat().st_mode & 0o077 == 0
