"""protection's NotifyHandler: someone on your GPU, and you on someone's, told in chat once."""

import pytest
from django.core import mail

from notifications.models import Channel
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
    paths = sorted(path for path, _ in receiver.received)
    assert paths == ["/other", "/owner"]
    owner_text = dict(receiver.received)["/owner"]["text"]
    assert "other (process 4242" in owner_text
    assert dict(receiver.received)["/other"]["event"] == "on_others_gpu"
    assert mail.outbox == []  # mail is EmailHandler's: this handler adds the chat channels
    assert list(HandlerRun.objects.values_list("status", flat=True)) == ["done"]


def test_nobody_with_a_chat_channel_is_a_skip(probe, booking, settings, tasks_run_inline):
    settings.VIOLATION_HANDLERS = [NOTIFY]
    for _ in range(3):  # past the grace period of a process there at the slot's first probe
        probe.saw((0, 4242, "other", "python steal.py"))
        check_hosts([probe.host.pk])
    assert list(HandlerRun.objects.values_list("status", flat=True)) == ["skipped"]
    assert mail.outbox == [] and not Channel.objects.exists()
