"""protection's NotifyHandler: someone on your GPU, and you on someone's, told once on the
channels each chose (the owner's mail included; the offender's mail is EmailHandler's)."""

import pytest
from django.core import mail

from notifications.models import Channel
from notifications.send import send_due
from protection.detection import check_hosts
from protection.models import HandlerRun
from tests.accounts import mapped_to_own_name

pytestmark = pytest.mark.django_db(transaction=True)
NOTIFY = "protection.handlers.notify.NotifyHandler"


def test_owner_and_offender_are_told_in_chat_once(
    probe,
    booking,
    settings,
    receiver,
    owner,
    other_user,
    tasks_run_inline,
):
    settings.VIOLATION_HANDLERS = [NOTIFY]
    mapped_to_own_name(other_user)  # "other" is the UNIX account whose process it is
    Channel.objects.create(user=owner, kind="slack", target=receiver.url + "/owner")
    Channel.objects.create(user=other_user, kind="json", target=receiver.url + "/other")
    for _ in range(3):
        probe.saw((0, 4242, "other", "python steal.py"))
        check_hosts([probe.host.pk])
    assert send_due() == 2  # as the sender does, apart from the protection checks
    paths = sorted(path for path, _ in receiver.received)
    assert paths == ["/other", "/owner"]
    owner_text = dict(receiver.received)["/owner"]["text"]
    assert "other (process 4242" in owner_text
    assert dict(receiver.received)["/other"]["event"] == "on_others_gpu"
    assert mail.outbox == []  # both chose chat; the offender's mail is EmailHandler's
    assert list(HandlerRun.objects.values_list("status", flat=True)) == ["done"]


def intrude(probe):
    for _ in range(3):  # past the grace period of a process there at the slot's first probe
        probe.saw((0, 4242, "other", "python steal.py"))
        check_hosts([probe.host.pk])


def test_an_owner_without_channels_is_mailed_at_their_address(
    probe, booking, settings, tasks_run_inline, owner
):
    settings.VIOLATION_HANDLERS = [NOTIFY]
    intrude(probe)
    send_due()  # as the notifications sender does
    assert [m.to for m in mail.outbox] == [[owner.email]]  # not the offender: EmailHandler's
    assert list(HandlerRun.objects.values_list("outcome", flat=True)) == ["told owner"]


def test_with_mail_off_it_tells_chat_channels_only(probe, booking, settings, tasks_run_inline):
    settings.VIOLATION_HANDLERS = [{"handler": NOTIFY, "options": {"with_mail": False}}]
    intrude(probe)
    assert list(HandlerRun.objects.values_list("status", flat=True)) == ["skipped"]
    assert mail.outbox == [] and not Channel.objects.exists()


def test_nobody_with_a_channel_is_a_skip(probe, booking, settings, tasks_run_inline, owner):
    settings.VIOLATION_HANDLERS = [NOTIFY]
    owner.email = ""
    owner.save()
    intrude(probe)
    assert list(HandlerRun.objects.values_list("status", flat=True)) == ["skipped"]
    assert mail.outbox == [] and not Channel.objects.exists()
