"""A user's channels (mail, chat webhooks) with the events each wants, and each delivery."""

from django.conf import settings
from django.db import models

# The events other apps send (notifications.send.notify); key -> what people read.
EVENTS = {
    "booking_starts": "Your booking starts soon",
    "booking_ends": "Your booking ends soon",
    "idle_warning": "Your booking is idle",
    "booking_released": "Idle GPUs of your booking were given back",
    "intruder": "Someone is on your reserved GPU",
    "on_others_gpu": "You are on someone else's GPU",
    "job_ended": "Your job ended",
    "queued_started": "Your queued job started",
    "queued_waiting": "Your queued job has waited long",
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

    @property
    def failing(self) -> bool:
        return bool(self.last_error_at) and (
            self.last_success_at is None or self.last_success_at < self.last_error_at
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
