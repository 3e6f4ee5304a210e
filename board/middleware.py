"""Times on pages in the reader's zone: their profile's, else the site's (one place, so every
{{ time|date }} and |when agrees)."""

from django.utils import timezone

from reservations.zones import user_zone


class UserTimeZoneMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        user = getattr(request, "user", None)
        if user is not None and user.is_authenticated:
            user.hive_zone = user_zone(user)
            timezone.activate(user.hive_zone)
        try:
            return self.get_response(request)
        finally:
            timezone.deactivate()
