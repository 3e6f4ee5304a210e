"""What the sign-in page offers: a local account, the lab's directory, its OIDC provider."""

from django import template

from accesscontrol import signin

register = template.Library()


@register.simple_tag
def sign_in_ways() -> dict:
    return signin.ways()
