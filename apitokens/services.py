"""Issuing, checking and revoking personal API tokens."""

import hashlib
import secrets
from datetime import datetime, timedelta

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from audit.log import record

from .models import ApiToken

SECRET_PREFIX = "hive_"  # noqa: S105  (marks a string as ours, e.g. for secret scanners)
SHOWN_PREFIX = 12  # "hive_" and 7 random characters: enough to tell a user's tokens apart
MAX_LIVE_TOKENS = 50
# last_used is written at most this often per token, not on every request.
LAST_USED_STEP = timedelta(minutes=1)


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def live_tokens(user):
    return ApiToken.objects.filter(user=user, revoked__isnull=True)


def check_new_token(user, name: str, expires: datetime | None) -> None:
    name = name.strip()
    if not name:
        raise ValidationError({"name": "Give the token a name, e.g. 'laptop'."})
    if live_tokens(user).filter(name=name).exists():
        raise ValidationError({"name": f"You already have a token named {name!r}."})
    if expires is not None and expires <= timezone.now():
        raise ValidationError({"expires": "The expiry must be in the future."})
    if live_tokens(user).count() >= MAX_LIVE_TOKENS:
        raise ValidationError(f"You have {MAX_LIVE_TOKENS} tokens; revoke one first.")


@transaction.atomic
def issue_token(user, name: str, expires: datetime | None = None) -> tuple[ApiToken, str]:
    """A new token and its secret. The secret is returned once and never stored."""
    check_new_token(user, name, expires)
    secret = SECRET_PREFIX + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(
        user=user,
        name=name.strip(),
        prefix=secret[:SHOWN_PREFIX],
        digest=digest(secret),
        expires=expires,
    )
    record("apitoken.create", actor=user, target=token, expires=expires and expires.isoformat())
    return token, secret


@transaction.atomic
def revoke_token(token: ApiToken, by) -> ApiToken:
    """Revoke at once; revoking a revoked token changes nothing."""
    if token.revoked is None:
        token.revoked = timezone.now()
        token.save(update_fields=["revoked"])
        record("apitoken.revoke", actor=by, target=token, owner=token.user.get_username())
    return token


def token_for_secret(secret: str) -> ApiToken:
    """The live token with this secret, or ValidationError saying why it cannot be used."""
    try:
        # One query by the digest's unique index, the user and their profile (their time
        # zone) joined: every request a token signs makes it.
        token = ApiToken.objects.select_related("user__profile").get(digest=digest(secret))
    except ApiToken.DoesNotExist:
        raise ValidationError("Invalid token.") from None
    if token.revoked is not None:
        raise ValidationError("This token was revoked.")
    now = timezone.now()
    if token.is_expired(now):
        raise ValidationError("This token has expired; create a new one (hive login).")
    if not token.user.is_active:
        raise ValidationError("This token's user is disabled.")
    _note_use(token, now)
    return token


def _note_use(token: ApiToken, now: datetime) -> None:
    if token.last_used is None or now - token.last_used >= LAST_USED_STEP:
        ApiToken.objects.filter(pk=token.pk).update(last_used=now)
        token.last_used = now
