"""Tell the reservation's owner ("someone is on your GPU") and the offender ("you are on
someone's GPU") on their notification channels, once per violation. Each person's channels
and the events they chose on the notifications page decide where it goes.

Options: ``owner_mail`` (True): the owner's mail channels too, as ``EmailHandler`` mails
owners only with ``to_owner``; ``offender_mail`` (False): the offender's mail channels too,
off because ``EmailHandler`` already mails offenders (rate-limited); ``with_mail``: sets both.
A person's notice has the same key from both handlers: a mail channel gets one mail.
"""

from notifications.send import CHAT, notify

from ..models import Violation
from . import Handler, Skip, texts


class NotifyHandler(Handler):
    def __init__(self, name="", owner_mail=True, offender_mail=False, with_mail=None):
        super().__init__(name)
        if with_mail is not None:  # the older option, for both people at once
            owner_mail = offender_mail = bool(with_mail)
        self.owner_mail, self.offender_mail = bool(owner_mail), bool(offender_mail)

    def handle(self, violation: Violation) -> str:
        subject = f"GPU Hive: {violation.offender_name} on {texts.gpu_text(violation)}"
        told = []
        owner, offender = violation.reservation_owner, violation.offender
        if owner is not None and owner != offender:
            key = f"violation-{violation.pk}-owner"
            if notify(owner, "intruder", key, subject, texts.to_owner(violation),
                      via=None if self.owner_mail else CHAT):  # fmt: skip
                told.append(owner.get_username())
        if offender is not None:
            key = f"violation-{violation.pk}-offender"
            if notify(offender, "on_others_gpu", key, subject, texts.to_offender(violation),
                      via=None if self.offender_mail else CHAT):  # fmt: skip
                told.append(offender.get_username())
        if not told:
            raise Skip("nobody to tell (no channel wants this, or told already)")
        return f"told {', '.join(told)}"
