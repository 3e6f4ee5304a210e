"""Times as each user reads them: in their profile's time zone, else the site's."""

from zoneinfo import ZoneInfo

from accesscontrol.models import Profile, site_zone


def user_zone(user) -> ZoneInfo:
    """The user's own zone (Profile.time_zone), else the site zone. A page's request reads it
    once: board.middleware keeps it on the request's user as ``hive_zone``."""
    known = getattr(user, "hive_zone", None)
    if known is not None:
        return known
    name = Profile.objects.filter(user_id=user.pk).values_list("time_zone", flat=True).first()
    return ZoneInfo(name) if name else site_zone()
