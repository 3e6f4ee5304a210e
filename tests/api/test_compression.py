"""Pages and API answers go out gzip-compressed to clients that accept it."""

import gzip

import pytest

from monitoring.models import Device, Host

pytestmark = pytest.mark.django_db


@pytest.fixture
def lab(db):
    host = Host.objects.create(name="node-1", address="10.0.0.1", status=Host.Status.UP)
    for i in range(8):
        Device.objects.create(host=host, index=i, uuid=f"GPU-{i}", name="NVIDIA H100 80GB HBM3")


@pytest.mark.parametrize("url", ["/api/devices/", "/"])
def test_answers_are_compressed_for_clients_that_accept_it(client, owner, lab, url):
    client.force_login(owner)
    plain = client.get(url)
    packed = client.get(url, HTTP_ACCEPT_ENCODING="gzip, deflate, br")
    assert plain.status_code == packed.status_code == 200
    assert "Content-Encoding" not in plain
    assert packed["Content-Encoding"] == "gzip"
    assert len(packed.content) < len(plain.content)
    body = gzip.decompress(packed.content)
    if url.startswith("/api/"):
        assert body == plain.content
    else:  # a page carries its own masked CSRF token each time: the same page, not bytes
        assert b"node-1" in body and body.count(b"<") == plain.content.count(b"<")
