"""The first admin's generated password is also written, once, to a 0600 file in the data
directory that `init` names, and removed when that admin first signs in."""

import stat
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.urls import reverse

from accesscontrol.firstadmin import FILE_NAME


@pytest.fixture
def data_dir(settings, tmp_path):
    settings.HIVE_DATA_DIR = tmp_path
    return tmp_path


def init(*args) -> str:
    out = StringIO()
    call_command("init", "--no-input", "--no-localhost", *args, stdout=out)
    return out.getvalue()


def sign_in(client, username, password):
    return client.post(reverse("login"), {"username": username, "password": password})


def test_init_writes_the_generated_password_to_a_private_file_it_names(db, data_dir):
    out = init("--admin", "chief")
    path = data_dir / FILE_NAME
    assert f"The password is also in {path} until chief first signs in." in out
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    lines = path.read_text().splitlines()
    assert lines[0] == "user: chief"
    password = lines[1].removeprefix("password: ")
    assert f"with password: {password}" in out
    assert get_user_model().objects.get(username="chief").check_password(password)


def test_a_password_given_on_the_command_line_is_not_written(db, data_dir):
    out = init("--admin", "chief", "--admin-password", "a-Long-pass-9")
    assert not (data_dir / FILE_NAME).exists()
    assert FILE_NAME not in out


def test_init_writes_it_once(db, data_dir):
    init("--admin", "chief")
    first = (data_dir / FILE_NAME).read_text()
    assert init("--first-run") == ""  # already set up: nothing, the file as it was
    assert (data_dir / FILE_NAME).read_text() == first


def test_the_admins_first_sign_in_removes_it_and_nobody_elses_does(db, data_dir, client):
    init("--admin", "chief")
    path = data_dir / FILE_NAME
    password = path.read_text().splitlines()[1].removeprefix("password: ")
    get_user_model().objects.create_user("other", "o@example.org", "pw-other-1")

    assert sign_in(client, "chief", "wrong-password").status_code == 200  # the form again
    assert path.exists()
    assert sign_in(client, "other", "pw-other-1").status_code == 302
    assert path.exists()
    client.logout()

    assert sign_in(client, "chief", password).status_code == 302
    assert not path.exists()


def test_a_first_sign_in_from_the_command_line_removes_it_too(db, data_dir, client):
    """`hive login` trades the password for a token: that is a sign-in as well."""
    init("--admin", "chief")
    path = data_dir / FILE_NAME
    password = path.read_text().splitlines()[1].removeprefix("password: ")
    body = {"username": "chief", "password": password, "name": "laptop"}
    response = client.post("/api/tokens/login/", body, content_type="application/json")
    assert response.status_code == 201, response.content
    assert not path.exists()
