"""The browser harness itself: a real Chromium signs in through the login form."""

import re


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


def in_site_design(page):
    """The site's own navigation bar and card, not the admin's header."""
    return page.locator(".hive-navbar").count() == 1 and page.locator("#site-name").count() == 0


def test_a_forgotten_password_is_reset_through_pages_of_the_site(
    page, live_server, owner, mailoutbox
):
    page.goto(f"{live_server.url}/accounts/login/")
    page.click("text=Forgot your password?")
    assert page.url.endswith("/accounts/password_reset/") and in_site_design(page)
    page.fill("input[name=email]", "owner@example.org")
    page.click("[type=submit]")
    page.wait_for_load_state()
    assert page.url.endswith("/accounts/password_reset/done/") and in_site_design(page)
    assert "Check your mail" in page.inner_text("h1")

    link = re.search(r"https?://\S+/accounts/reset/\S+/", mailoutbox[0].body).group(0)
    page.goto(live_server.url + link[link.index("/accounts/") :])
    assert in_site_design(page) and "Choose a new password" in page.inner_text("h1")
    page.fill("input[name=new_password1]", "a-new-pw-4711")
    page.fill("input[name=new_password2]", "a-new-pw-4711")
    page.click("[type=submit]")
    page.wait_for_load_state()
    assert in_site_design(page) and "Password changed" in page.inner_text("h1")
    page.click("text=Sign in")
    page.fill("input[name=username]", "owner")
    page.fill("input[name=password]", "a-new-pw-4711")
    page.click("[type=submit]")
    page.wait_for_load_state()
    assert "/accounts/login/" not in page.url


def test_signing_out_says_so_on_the_sign_in_page(login, owner, live_server):
    page = login("owner", "pw-owner-1")
    page.evaluate("document.getElementById('hive-sign-out').submit()")
    page.wait_for_url("**/accounts/login/")
    assert in_site_design(page)
    assert page.inner_text(".hive-message") == "You are signed out."
