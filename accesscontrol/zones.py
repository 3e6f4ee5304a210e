"""Times on pages in the reader's zone: their profile's, else the site's (one place, so every
{{ time|date }} and |when agrees)."""

from collections.abc import Callable
from zoneinfo import ZoneInfo

from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import AnonymousUser
from django.http import HttpRequest, HttpResponseBase
from django.utils import timezone

from core.zones import site_zone

from .models import Profile


def user_zone(user: AbstractBaseUser | AnonymousUser) -> ZoneInfo:
    """The user's own zone (Profile.time_zone), else the site zone. A page's request reads it
    once: UserTimeZoneMiddleware keeps it on the request's user as ``hive_zone``."""
    known = getattr(user, "hive_zone", None)
    if isinstance(known, ZoneInfo):
        return known
    if isinstance(user, AnonymousUser):  # no profile
        return site_zone()
    name = Profile.objects.filter(user_id=user.pk).values_list("time_zone", flat=True).first()
    return zone_named(name)


def profile_zone(profile: Profile | None) -> ZoneInfo:
    """``user_zone`` from a profile already read (or None: the user has none)."""
    return zone_named(profile.time_zone if profile is not None else "")


def zone_named(name: str | None) -> ZoneInfo:
    """A profile's zone name as a zone; none named: the site's."""
    return ZoneInfo(name) if name else site_zone()


class UserTimeZoneMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        user = getattr(request, "user", None)
        if user is not None and user.is_authenticated:
            user.hive_zone = user_zone(user)
            timezone.activate(user.hive_zone)
        try:
            return self.get_response(request)
        finally:
            timezone.deactivate()
