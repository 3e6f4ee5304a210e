"""Template context for every page: the active messages of the day and the user's ban."""

from .coverage import active_ban
from .models import Message


def motd(request):
    """Adds ``motd_messages`` and ``access_ban``; render them with accesscontrol/banner.html.

    Read on every request (two small queries), so a new message or ban shows at once.
    """
    user = getattr(request, "user", None)
    signed_in = bool(user and user.is_authenticated)
    return {
        "motd_messages": list(Message.objects.active()),
        "access_ban": active_ban(user) if signed_in else None,
    }
