"""The browser harness itself: a real Chromium signs in through the login form."""


def test_login_form_signs_in_and_shows_username(login, owner, live_server):
    page = login("owner", "pw-owner-1")
    assert "owner" in page.content()


def test_wrong_password_stays_on_login_with_error(page, live_server, owner):
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("input[name=username]", "owner")
    page.fill("input[name=password]", "wrong")
    page.click("[type=submit]")
    page.wait_for_load_state()
    assert "/accounts/login/" in page.url
    assert page.locator(".errornote, .errorlist, .error").count() > 0
