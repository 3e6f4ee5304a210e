"""Mail the offender (and optionally the reservation's owner and the admins)."""

from datetime import timedelta

from django.contrib.auth import get_user_model
from django.core.mail import send_mail
from django.utils import timezone

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
        offender, others = self.recipients(violation)
        if not (offender or others):
            raise Skip("nobody to mail (no e-mail address known)")
        subject = f"GPU Hive: {violation.offender_name} on {texts.gpu_text(violation)}"
        if offender:
            send_mail(subject, texts.to_offender(violation), None, offender)
        if others:
            send_mail(subject, texts.to_owner(violation), None, others)
        self.sent += 1
        return f"mailed {', '.join(offender + others)}"[:255]

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

    def recipients(self, violation: Violation) -> tuple[list[str], list[str]]:
        offender = []
        if self.to_offender and violation.offender and violation.offender.email:
            offender = [violation.offender.email]
        others = []
        owner = violation.reservation_owner
        if self.to_owner and owner and owner.email:
            others.append(owner.email)
        if self.to_admins:
            admins = get_user_model().objects.filter(is_superuser=True, is_active=True)
            others += [e for e in admins.values_list("email", flat=True) if e]
        return offender, sorted(set(others) - set(offender))
