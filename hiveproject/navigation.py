"""The site's menu, grouped as people think of the service: see, book, run, admin, me.

One list, read by templates/base.html; a page marks its group active by its URL prefix.
"""

from django.urls import NoReverseMatch, reverse

# (group, label, URL name, who sees it: "user" or "staff")
MENU = (
    ("see", "GPU board", "overview", "user"),
    ("see", "Who booked what", "reservations-overview", "user"),
    ("see", "Protection", "protection-violations", "user"),
    ("see", "GPU-hours and energy", "usage", "user"),
    ("book", "Timeline", "reservations-timeline", "user"),
    ("book", "Calendar", "reservations-calendar", "user"),
    ("book", "My reservations", "reservations-mine", "user"),
    ("book", "My access", "access-week", "user"),
    ("book", "Idle bookings", "fairuse-idle", "user"),
    ("run", "Jobs", "job-list", "user"),
    ("run", "New job", "job-new", "user"),
    ("run", "Queue", "queue", "user"),
    ("admin", "GPU-hours booked and used", "reservations-usage", "staff"),
    ("admin", "Admin site", "admin:index", "staff"),
    ("user", "Profile", "profile", "user"),
    ("user", "Notifications", "notifications", "user"),
    ("user", "API tokens", "api-tokens", "user"),
    ("user", "API documentation", "api-docs", "user"),
)


def navigation(request) -> dict:
    """Adds ``nav``: {group: [{"label", "url", "active"}]} for the signed-in user."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {"nav": {}}
    groups: dict[str, list] = {"see": [], "book": [], "run": [], "admin": [], "user": []}
    for group, label, name, audience in MENU:
        if audience == "staff" and not user.is_staff:
            continue
        try:
            url = reverse(name)
        except NoReverseMatch:  # an app left out of this installation
            continue
        groups[group].append({"label": label, "url": url, "active": is_current(request, url)})
    groups["user"].append({"label": "Sign out", "form": "hive-sign-out"})
    return {"nav": groups}


def is_current(request, url: str) -> bool:
    """A page is current for its own subpages too; the board ("/") only for itself."""
    return request.path == url or (url != reverse("overview") and request.path.startswith(url))
