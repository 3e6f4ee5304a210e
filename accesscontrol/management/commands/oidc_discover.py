"""Print the HIVE_OIDC_* endpoint lines for hive.env from a provider's discovery document.

The service never asks the provider at start (a provider that is down must not stop it): the
admin runs this once, checks the lines and adds them with the client id and secret."""

import requests
from django.core.management.base import BaseCommand, CommandError

# Our variable ← the discovery document's field (OpenID Connect Discovery 1.0).
ENDPOINTS = {
    "HIVE_OIDC_AUTHORIZATION_ENDPOINT": "authorization_endpoint",
    "HIVE_OIDC_TOKEN_ENDPOINT": "token_endpoint",
    "HIVE_OIDC_USERINFO_ENDPOINT": "userinfo_endpoint",
    "HIVE_OIDC_JWKS_ENDPOINT": "jwks_uri",
}


class Command(BaseCommand):
    help = "Print the HIVE_OIDC_* endpoints of an OpenID Connect provider, from its issuer URL."

    def add_arguments(self, parser):
        parser.add_argument("issuer", help="e.g. https://login.lab.example/realms/lab")

    def handle(self, *args, issuer, **options):
        url = f"{issuer.rstrip('/')}/.well-known/openid-configuration"
        try:
            answer = requests.get(url, timeout=10)
            answer.raise_for_status()
            document = answer.json()
        except (requests.RequestException, ValueError) as exc:
            raise CommandError(f"Could not read {url}: {exc}") from None
        missing = [field for field in ENDPOINTS.values() if not document.get(field)]
        if missing:
            raise CommandError(f"{url} does not name: {', '.join(missing)}.")
        for name, field in ENDPOINTS.items():
            self.stdout.write(f"{name}={document[field]}")
        algorithms = document.get("id_token_signing_alg_values_supported") or []
        if "RS256" not in algorithms:
            self.stdout.write(f"HIVE_OIDC_SIGN_ALGO={(algorithms or ['RS256'])[0]}")
