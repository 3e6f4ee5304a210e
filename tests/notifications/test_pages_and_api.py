"""Channels are their owner's alone: the page and the API, for every persona."""

import pytest
from django.utils import timezone

from notifications.models import Channel

PAGE, API = "/notifications/", "/api/notification-channels/"


@pytest.fixture
def hook(owner):
    return Channel.objects.create(
        user=owner, kind="slack", target="https://hooks.example.org/T0/secret", events=["job_ended"]
    )


def test_anonymous_visitors_see_and_change_nothing(client, hook):
    assert client.get(PAGE).status_code == 302
    assert client.post(f"{PAGE}{hook.pk}/delete/").status_code == 302
    assert client.get(API).status_code == 403
    assert Channel.objects.filter(pk=hook.pk).exists()


def test_the_owner_adds_edits_and_removes_channels_on_the_page(client, owner, hook):
    client.force_login(owner)
    assert "hooks.example.org/T0/secret" in client.get(PAGE).content.decode()
    answer = client.post(PAGE, {"kind": "json", "target": "https://example.org/in",
                                "events": ["intruder", "job_ended"], "enabled": "on"})  # fmt: skip
    assert answer.status_code == 302
    added = Channel.objects.get(kind="json")
    assert added.user == owner and added.events == ["intruder", "job_ended"]
    prefix = f"c{hook.pk}"
    client.post(f"{PAGE}{hook.pk}/edit/", {f"{prefix}-kind": "slack",
                f"{prefix}-target": hook.target, f"{prefix}-events": ["idle_warning"]})  # fmt: skip
    hook.refresh_from_db()
    assert hook.events == ["idle_warning"] and not hook.enabled
    client.post(f"{PAGE}{hook.pk}/delete/")
    assert not Channel.objects.filter(pk=hook.pk).exists()


def test_the_owner_uses_the_api(client, owner, hook):
    client.force_login(owner)
    assert [c["id"] for c in client.get(API).json()] == [hook.pk]
    body = {"kind": "matrix", "target": "https://matrix.example.org/hook/1",
            "events": ["booking_released"]}  # fmt: skip
    answer = client.post(API, body, content_type="application/json")
    assert answer.status_code == 201 and answer.json()["events"] == ["booking_released"]


def test_another_user_and_an_admin_cannot_see_or_touch_it(client, other_user, admin_user, hook):
    for user in (other_user, admin_user):
        client.force_login(user)
        assert "secret" not in client.get(PAGE).content.decode()
        assert client.get(API).json() == []
        assert client.get(f"{API}{hook.pk}/").status_code == 404
        assert client.delete(f"{API}{hook.pk}/").status_code == 404
        assert client.post(f"{PAGE}{hook.pk}/delete/").status_code == 404
    assert Channel.objects.filter(pk=hook.pk).exists()


@pytest.mark.parametrize(
    "body, field",
    [
        ({"kind": "slack", "target": "file:///etc/passwd"}, "target"),
        ({"kind": "json", "target": "not a url"}, "target"),
        ({"kind": "email", "target": "no-at-sign"}, "target"),
        ({"kind": "pager", "target": "https://x.org"}, "kind"),
        ({"kind": "slack", "target": "https://x.org", "events": ["lunch"]}, "events"),
    ],
)
def test_bad_channels_are_refused_with_field_errors(client, owner, body, field):
    client.force_login(owner)
    answer = client.post(API, body, content_type="application/json")
    assert answer.status_code == 400 and field in answer.json() and answer.json()["detail"]
    page = client.post(PAGE, body)
    assert page.status_code == 400
    assert not Channel.objects.exists()


def test_a_failing_channel_shows_on_the_page(client, owner, hook):
    Channel.objects.filter(pk=hook.pk).update(
        last_error="HTTPStatusError: 404", last_error_at=timezone.now()
    )
    client.force_login(owner)
    page = client.get(PAGE).content.decode()
    assert "failing" in page and "HTTPStatusError: 404" in page


def test_a_failing_channel_shows_on_the_profile(client, owner, other_user, hook):
    Channel.objects.filter(pk=hook.pk).update(
        last_error="ConnectError", last_error_at=timezone.now()
    )
    client.force_login(other_user)
    assert "ConnectError" not in client.get("/access/profile/").content.decode()
    client.force_login(owner)
    page = client.get("/access/profile/").content.decode()
    assert "Slack notifications are failing" in page and "ConnectError" in page
