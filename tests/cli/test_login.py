"""hive login: a password buys a token kept in a file only the user can read."""

import stat
import tomllib

from apitokens.models import ApiToken


def test_login_keeps_the_url_and_a_token_not_the_password(hive, live_server, owner, hive_config):
    result = hive("login", live_server.url, input="owner\npw-owner-1\n")
    assert result.exit_code == 0, result.output
    assert f"Signed in to {live_server.url} as owner" in result.output
    stored = tomllib.loads(hive_config.read_text())
    assert stored["url"] == live_server.url and stored["username"] == "owner"
    assert stored["token"].startswith("hive_") and "pw-owner-1" not in hive_config.read_text()
    assert stat.S_IMODE(hive_config.stat().st_mode) == 0o600
    token = ApiToken.objects.get()
    assert token.user == owner and token.name.startswith("hive on ")
    assert hive("status").exit_code == 0


def test_login_again_revokes_the_token_it_replaces(hive, live_server, owner):
    hive("login", live_server.url, "-u", "owner", "--password-stdin", input="pw-owner-1\n")
    hive("login", live_server.url, "-u", "owner", "--password-stdin", input="pw-owner-1\n")
    assert sorted(t.state for t in ApiToken.objects.all()) == ["active", "revoked"]


def test_login_with_an_expiry(hive, live_server, owner):
    args = ("login", live_server.url, "-u", "owner", "--password-stdin", "--expires-days", "7")
    assert hive(*args, input="pw-owner-1\n").exit_code == 0
    assert ApiToken.objects.get().expires is not None


def test_a_wrong_password_keeps_nothing(hive, live_server, owner, hive_config):
    result = hive("login", live_server.url, input="owner\nnope\n")
    assert result.exit_code == 1
    assert "Not allowed: Wrong user name or password." in result.output
    assert not hive_config.exists() and not ApiToken.objects.exists()


def test_a_wrong_url_is_said_before_the_password_is_asked(hive, live_server, hive_config):
    result = hive("login", "http://127.0.0.1:9/")
    assert result.exit_code == 1 and "Cannot reach http://127.0.0.1:9" in result.output
    assert "Password" not in result.output
    result = hive("login", f"{live_server.url}/nothing-here")
    assert result.exit_code == 1 and "does not look like a GPU Hive server" in result.output
    result = hive("login", "gpus.example.org")
    assert result.exit_code == 1 and "write it with http:// or https://" in result.output
    assert not hive_config.exists()


def test_commands_before_login_say_to_log_in(hive, db):
    result = hive("status")
    assert result.exit_code == 1
    assert "Not signed in: run `hive login URL` first" in result.output
