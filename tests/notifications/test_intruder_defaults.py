"""Intruder notices reach the booking's owner with the settings as shipped: no handler list
chosen by the test. The real probing loop over the test sshd, fake nvidia-smi naming a real
process of another user (as in tests/protection/test_end_to_end.py, without root: the owner's
account is one that runs nothing here, the intruder is this test's own account)."""

import os
import pwd
from datetime import timedelta

import pytest
from django.conf import settings as django_settings
from django.core import mail
from django.utils import timezone

from accesscontrol.services import ensure_default_group, profile_for
from hiveproject import settings as shipped
from monitoring.loop import ProbeLoop
from monitoring.models import Device
from notifications.models import Channel, Delivery
from notifications.send import send_due
from protection.models import HandlerRun, Violation
from reservations.services import create_reservation
from tests.monitoring.conftest import (  # noqa: F401  (the real parts, shared)
    _fresh_connections,
    fake_gpu_root,
    gpus,
    real_processes,
    ssh_host,
    sshd,
)
from tests.monitoring.test_ssh_probe import UUID0, UUID1, gpu_row
from tests.protection.test_end_to_end import on_gpu, probe_once

pytestmark = pytest.mark.django_db(transaction=True)

ME = pwd.getpwuid(os.getuid()).pw_name
NOTIFY = "protection.handlers.notify.NotifyHandler"


def unix_name(user, name):
    profile = profile_for(user)
    profile.unix_username = name
    profile.save()


@pytest.fixture
def intruded(ssh_host, gpus, owner, other_user, tasks_run_inline, real_processes):  # noqa: F811
    """owner booked GPU 0; a process of other_user's account appears on it."""
    assert "VIOLATION_HANDLERS" not in os.environ
    assert django_settings.VIOLATION_HANDLERS == shipped.VIOLATION_HANDLERS  # as shipped
    fake = gpus("127.0.0.2")
    fake.set_gpus([gpu_row(0, UUID0), gpu_row(1, UUID1)])
    loop = ProbeLoop(holder="test")
    probe_once(loop)
    unix_name(owner, "gpuhive-nobody-runs-this")
    unix_name(other_user, ME)
    ensure_default_group()
    start = timezone.now() - timedelta(seconds=30)
    device = Device.objects.get(uuid=UUID0)
    create_reservation(owner, title="thesis", devices=[device], start=start,
                       end=start + timedelta(hours=1))  # fmt: skip
    probe_once(loop)  # the booking's first checked probe: what appears later intrudes

    def intrude():
        on_gpu(fake, real_processes(["sleep", "341"]))
        probe_once(loop)
        send_due()  # as the notifications sender does, apart from the protection checks
        return Violation.objects.get()

    return intrude


def test_the_owner_is_mailed_and_sees_it_on_every_page(intruded, owner, client):
    violation = intruded()
    assert violation.reservation_owner == owner
    to_owner = [m for m in mail.outbox if m.to == ["owner@example.org"]]
    assert len(to_owner) == 1, [m.to for m in mail.outbox]
    assert "sleep 341" in to_owner[0].body and "reserved for 'thesis'" in to_owner[0].body
    assert Delivery.objects.get(channel__user=owner).event == "intruder"
    assert HandlerRun.objects.get(handler=NOTIFY).outcome == "told owner"
    client.force_login(owner)
    page = client.get("/reservations/mine/").content.decode()
    assert "Someone is on your reserved GPU" in page and "sleep 341" in page


def test_an_owner_who_chose_chat_is_told_in_chat_not_mail(intruded, owner, receiver):
    Channel.objects.create(user=owner, kind="slack", target=receiver.url + "/owner")
    intruded()
    assert [path for path, _ in receiver.received] == ["/owner"]
    assert "sleep 341" in receiver.received[0][1]["text"]
    assert not [m for m in mail.outbox if m.to == ["owner@example.org"]]


def test_the_notice_on_the_page_ends_with_the_intrusion(intruded, owner, client):
    violation = intruded()
    client.force_login(owner)
    assert "Someone is on your reserved GPU" in client.get("/").content.decode()
    violation.ended_at = timezone.now()
    violation.save()
    assert "Someone is on your reserved GPU" not in client.get("/").content.decode()
