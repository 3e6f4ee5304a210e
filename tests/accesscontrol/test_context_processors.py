"""The motd and the user's ban, on every page (via the context processor and banner)."""

from datetime import timedelta

from django.contrib.auth.models import AnonymousUser
from django.template.loader import render_to_string
from django.test import RequestFactory
from django.utils import timezone

from accesscontrol.context_processors import motd
from accesscontrol.models import Message
from accesscontrol.services import ban_user


def banner_for(user) -> str:
    request = RequestFactory().get("/")
    request.user = user
    return render_to_string("accesscontrol/banner.html", motd(request))


def test_it_shows_only_active_messages(db):
    now = timezone.now()
    Message.objects.create(text="Cluster upgrade on Friday", level="warning")
    Message.objects.create(text="Old news", ends=now - timedelta(minutes=1))
    Message.objects.create(text="Hidden", enabled=False)
    Message.objects.create(text="Later", starts=now + timedelta(hours=1))
    html = banner_for(AnonymousUser())
    assert "Cluster upgrade on Friday" in html and "motd-warning" in html
    assert not any(text in html for text in ("Old news", "Hidden", "Later"))


def test_it_shows_a_ban_to_the_banned_user_at_once(owner, other_user):
    assert "banned" not in banner_for(owner)
    ban_user(owner, "ran jobs on reserved GPUs")
    assert "You are banned: ran jobs on reserved GPUs" in banner_for(owner)
    assert "banned" not in banner_for(other_user)
