"""A user's channels (mail, chat webhooks) with the events each wants, and each delivery."""

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import models

from .targets import TargetRefused, check_url

# The events other apps send (notifications.send.notify); key -> what people read.
EVENTS = {
    "booking_starts": "Your booking starts soon",
    "booking_ends": "Your booking ends soon",
    "idle_warning": "Your booking is idle",
    "booking_released": "Idle GPUs of your booking were given back",
    "booking_withdrawn": "Your booking was cancelled because your access changed",
    "intruder": "Someone is on your reserved GPU",
    "on_others_gpu": "You are on someone else's GPU",
    "intruder_admin": "Someone is on a GPU not theirs (admins' copy)",
    "job_ended": "Your job ended",
    "queued_started": "Your queued job started",
    "queued_waiting": "Your queued job has waited long",
    "queued_stopped": "Your queued job was stopped to make room",
}


def all_events() -> list[str]:
    return list(EVENTS)


class Channel(models.Model):
    """One place a user is told things: their mail address, or a chat webhook."""

    class Kind(models.TextChoices):
        EMAIL = "email", "Mail"
        SLACK = "slack", "Slack"
        MATTERMOST = "mattermost", "Mattermost"
        MATRIX = "matrix", "Matrix (hookshot webhook)"
        JSON = "json", "Generic JSON webhook"

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="channels"
    )
    kind = models.CharField(max_length=12, choices=Kind.choices)
    # A webhook's URL (a secret: shown to its owner only), or for mail an address ("" = the
    # account's own address).
    target = models.CharField(max_length=500, blank=True)
    events = models.JSONField(default=all_events, help_text="Event keys this channel gets.")
    enabled = models.BooleanField(default=True)
    last_error = models.TextField(blank=True)
    last_error_at = models.DateTimeField(null=True, blank=True)
    last_success_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["user", "id"]

    def __str__(self):
        return f"{self.get_kind_display()} of {self.user}"

    def clean(self):
        """The channel's rules for every form that saves one (the API calls the same)."""
        check_target(self.kind, self.target)
        if self.pk is None and self.user_id is not None:
            check_room(self.user_id)

    @property
    def failing(self) -> bool:
        return bool(self.last_error_at) and (
            self.last_success_at is None or self.last_success_at < self.last_error_at
        )


def check_target(kind: str | None, target: str) -> None:
    """The one check of a channel's target: a mail address, or a webhook URL the lab
    allows (notifications.targets; checked again at each delivery)."""
    if kind == Channel.Kind.EMAIL:
        if target:
            try:
                validate_email(target)
            except ValidationError:
                raise ValidationError({"target": "Enter a mail address."}) from None
        return
    try:
        check_url(target, unresolved_ok=True)
    except TargetRefused as exc:
        raise ValidationError({"target": str(exc)}) from None


def check_room(user_id: int) -> None:
    """One user's channels are capped (NOTIFY_MAX_CHANNELS): each is work for the sender."""
    cap = settings.NOTIFY_MAX_CHANNELS
    if Channel.objects.filter(user_id=user_id).count() >= cap:
        raise ValidationError(
            f"You have {cap} channels, the most one user may have (NOTIFY_MAX_CHANNELS): "
            "remove one first."
        )


class Delivery(models.Model):
    """One event told on one channel. The unique (channel, key) makes a second one impossible,
    however often the event is reported; failures are retried with backoff."""

    class State(models.TextChoices):
        PENDING = "pending", "Waiting to be sent"
        SENDING = "sending", "Being sent"
        SENT = "sent", "Sent"
        FAILED = "failed", "Given up"

    channel = models.ForeignKey(Channel, on_delete=models.CASCADE, related_name="deliveries")
    event = models.CharField(max_length=30)
    key = models.CharField(max_length=200, help_text="The event's identity, e.g. task-12-ended.")
    subject = models.CharField(max_length=255)
    text = models.TextField()
    link = models.CharField(max_length=500, blank=True)
    state = models.CharField(max_length=10, choices=State.choices, default=State.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    next_try_at = models.DateTimeField()
    last_error = models.TextField(blank=True)
    created = models.DateTimeField(auto_now_add=True)
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created"]
        verbose_name_plural = "deliveries"
        indexes = [models.Index(fields=["state", "next_try_at"])]
        constraints = [
            models.UniqueConstraint(fields=["channel", "key"], name="delivery_once_per_event")
        ]

    def __str__(self):
        return f"{self.event} to {self.channel}"
