"""The profile page: each user sees their own accounts and the key to authorise, and sets
only their time zone (the UNIX names decide as whom jobs run, so admins set those)."""

import pytest

from accesscontrol.models import HostAccount
from accesscontrol.services import profile_for

URL = "/access/profile/"


@pytest.fixture
def accounts(owner, other_user, node1, node2):
    HostAccount.objects.create(profile=profile_for(owner), host=node1, unix_username="own1")
    HostAccount.objects.create(profile=profile_for(other_user), host=node2, unix_username="oth2")


def test_anonymous_visitors_are_sent_to_sign_in(client, db):
    response = client.get(URL)
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]
    assert client.post(URL, {"time_zone": "Asia/Tokyo"}).status_code == 302


@pytest.mark.parametrize(
    ("persona", "own", "not_own"),
    [("owner", "own1", "oth2"), ("other_user", "oth2", "own1"), ("admin_user", None, "own1")],
)
def test_each_user_sees_their_own_accounts_and_the_key(
    client, accounts, request, persona, own, not_own
):
    user = request.getfixturevalue(persona)
    client.force_login(user)
    page = client.get(URL).content.decode()
    assert f"<code>{user.username}</code>" not in page  # a web name is not a UNIX name
    if own:
        assert "Jobs run only on these hosts" in page and f"<code>{own}</code>" in page
    else:
        assert "You have no UNIX account here yet" in page
    assert not_own not in page
    assert "ssh-ed25519" in page and "&gt;&gt; ~/.ssh/authorized_keys" in page


def test_the_time_zone_is_saved_and_a_bad_one_is_refused(client, owner):
    client.force_login(owner)
    response = client.post(URL, {"time_zone": "Asia/Tokyo"})
    assert response.status_code == 302
    assert profile_for(owner).time_zone == "Asia/Tokyo"
    response = client.post(URL, {"time_zone": "Mars/Olympus_Mons"})
    assert response.status_code == 400
    assert "is not a known time zone" in response.content.decode()
    assert profile_for(owner).time_zone == "Asia/Tokyo"
    assert client.post(URL, {"time_zone": ""}).status_code == 302  # back to the lab's zone
    assert profile_for(owner).time_zone == ""


def test_the_unix_name_cannot_be_set_from_the_page(client, owner):
    before = profile_for(owner).unix_username
    client.force_login(owner)
    assert client.post(URL, {"time_zone": "", "unix_username": "root"}).status_code == 302
    assert profile_for(owner).unix_username == before != "root"


def test_the_usual_account_is_shown_when_an_admin_set_one(client, owner):
    profile = profile_for(owner)
    profile.unix_username = "owen"
    profile.save()
    client.force_login(owner)
    assert "Jobs run as <code>owen</code> on every host." in client.get(URL).content.decode()


def test_a_user_is_told_when_their_account_does_not_exist_on_this_machine(client, owner, db):
    from monitoring import localaccounts
    from monitoring.models import Host

    Host.objects.create(name="localhost", address="localhost", transport=Host.Transport.LOCAL)
    profile = profile_for(owner)
    profile.unix_username = "gpuhive-no-such-account"
    profile.save()
    client.force_login(owner)
    page = client.get(URL).content.decode()
    expected = localaccounts.problem("localhost", "gpuhive-no-such-account")
    assert expected  # as root: no such account; otherwise: tasks run only as the service's
    assert f'role="alert">{expected}'.replace("'", "&#x27;") in page

    profile.unix_username = localaccounts.service_account()  # one that exists here
    profile.save()
    assert 'role="alert"' not in client.get(URL).content.decode()
