"""Mail the offender (and optionally the reservation's owner and the admins), through the
notifications app: each person's mail channels that want the event, sent (and retried) by
the notifications sender. The name stays, as admins list it in VIOLATION_HANDLERS.

Each person's notice of one violation has the key NotifyHandler gives it too, so a mail
channel told by both handlers gets one mail."""

from datetime import timedelta

from django.contrib.auth import get_user_model
from django.utils import timezone

from notifications.send import MAIL, notify

from ..models import HandlerRun, Violation
from . import Handler, Skip, texts


class EmailHandler(Handler):
    """Options: ``to_offender`` (True), ``to_owner`` (False), ``to_admins`` (False),
    ``window_seconds`` (600: at most one mail per offender per reservation in that time),
    ``max_per_cycle`` (20: a flood of intruders cannot turn into a flood of mail)."""

    def __init__(
        self,
        name="",
        to_offender=True,
        to_owner=False,
        to_admins=False,
        window_seconds=600,
        max_per_cycle=20,
    ):
        super().__init__(name)
        self.to_offender, self.to_owner, self.to_admins = to_offender, to_owner, to_admins
        self.window = timedelta(seconds=float(window_seconds))
        self.max_per_cycle = int(max_per_cycle)
        self.sent = 0  # in this task, i.e. this cycle's batch

    def handle(self, violation: Violation) -> str:
        if self.recently_mailed(violation):
            raise Skip(f"already mailed about {violation.offender_name} on this reservation")
        if self.sent >= self.max_per_cycle:
            raise Skip(f"cap of {self.max_per_cycle} mails per cycle reached")
        subject = f"GPU Hive: {violation.offender_name} on {texts.gpu_text(violation)}"
        mailed = [
            user.get_username()
            for user, event, role, text in self.recipients(violation)
            if notify(user, event, f"violation-{violation.pk}-{role}", subject, text, via=MAIL)
        ]
        if not mailed:
            raise Skip("nobody to mail (no mail address or mail channel for this, or mailed)")
        self.sent += 1
        return f"mailed {', '.join(mailed)}"[:255]

    def recently_mailed(self, violation: Violation) -> bool:
        """Rate limit per offender per reservation (on that host), across violations."""
        return HandlerRun.objects.filter(
            handler=self.name,
            status=HandlerRun.Status.DONE,
            started_at__gte=timezone.now() - self.window,
            violation__device__host=violation.device.host_id,
            violation__offender_unix=violation.offender_unix,
            violation__reservation=violation.reservation_id,
        ).exists()

    def recipients(self, violation: Violation) -> list[tuple]:
        """(user, event, role in the key, text) for each person to mail, each person once:
        the offender, the owner, then the admins."""
        offender, owner = violation.offender, violation.reservation_owner
        found = []
        if self.to_offender and offender is not None:
            found.append((offender, "on_others_gpu", "offender", texts.to_offender(violation)))
        if self.to_owner and owner is not None:
            found.append((owner, "intruder", "owner", texts.to_owner(violation)))
        if self.to_admins:
            admins = get_user_model().objects.filter(is_superuser=True, is_active=True)
            found += [(a, "intruder_admin", "admin", texts.to_owner(violation)) for a in admins]
        once: dict = {}  # each person once, in that order
        for entry in found:
            once.setdefault(entry[0].pk, entry)
        return list(once.values())
