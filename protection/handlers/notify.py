"""Tell the reservation's owner ("someone is on your GPU") and the offender ("you are on
someone's GPU") on their notification channels, once per violation.

Option ``with_mail`` (False): also their mail channels; off by default because
``EmailHandler`` already mails, so this handler adds the chat channels.
"""

from notifications.send import notify

from ..models import Violation
from . import Handler, Skip, texts


class NotifyHandler(Handler):
    def __init__(self, name="", with_mail=False):
        super().__init__(name)
        self.chat_only = not with_mail

    def handle(self, violation: Violation) -> str:
        subject = f"GPU Hive: {violation.offender_name} on {texts.gpu_text(violation)}"
        told = []
        owner, offender = violation.reservation_owner, violation.offender
        if owner is not None and owner != offender:
            key = f"violation-{violation.pk}-owner"
            if notify(owner, "intruder", key, subject, texts.to_owner(violation),
                      chat_only=self.chat_only):  # fmt: skip
                told.append(owner.get_username())
        if offender is not None:
            key = f"violation-{violation.pk}-offender"
            if notify(offender, "on_others_gpu", key, subject, texts.to_offender(violation),
                      chat_only=self.chat_only):  # fmt: skip
                told.append(offender.get_username())
        if not told:
            raise Skip("nobody to tell (no channel wants this, or told already)")
        return f"told {', '.join(told)}"
