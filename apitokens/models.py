"""Personal API tokens: scripts (and the `hive` client) act as the token's owner.

Only the SHA-256 of a token's secret is stored. The secret is random (256 bits), so a plain
hash is enough to make a stolen database useless for signing in, and it lets a request's
token be found by one indexed lookup.
"""

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone


class ApiToken(models.Model):
    """One named token of one user; revoked tokens are kept to show when they were used."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100, help_text="What it is for, e.g. 'laptop'.")
    prefix = models.CharField(
        max_length=16, help_text="The secret's first characters, to tell tokens apart."
    )
    digest = models.CharField(max_length=64, unique=True, help_text="SHA-256 of the secret.")
    created = models.DateTimeField(default=timezone.now)
    expires = models.DateTimeField(null=True, blank=True, help_text="Empty: never.")
    last_used = models.DateTimeField(null=True, blank=True)
    revoked = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created"]
        constraints = [
            models.UniqueConstraint(
                fields=["user", "name"],
                condition=Q(revoked__isnull=True),
                name="api_token_name_unique_while_live",
            )
        ]

    def __str__(self):
        return f"{self.name} ({self.user}, {self.prefix}…)"

    def is_expired(self, now=None) -> bool:
        return self.expires is not None and self.expires <= (now or timezone.now())

    @property
    def state(self) -> str:
        if self.revoked:
            return "revoked"
        return "expired" if self.is_expired() else "active"
