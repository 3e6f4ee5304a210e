"""The test people's claims: the standard ones, a UNIX name and groups (scope "lab")."""

import json

from django.conf import settings
from oidc_provider.lib.claims import ScopeClaims


def person(user) -> dict:
    return json.loads((settings.WORKDIR / "people.json").read_text())[user.username]


def userinfo(claims, user):
    claims.update(person(user)["claims"])
    return claims


class LabClaims(ScopeClaims):
    info_lab = ("The lab", "Your UNIX account and groups.")

    def scope_lab(self):
        claims = person(self.user)["claims"]
        return {name: claims.get(name) for name in ("unix_name", "groups")}
