"""Run the test OIDC provider: `python -m tests.oidcprovider.serve PORT` (tests/directoryparts).

Sets up its database, signing key, people and client, then serves until terminated."""

import json
import os
import sys
from wsgiref.simple_server import WSGIRequestHandler, make_server

os.environ["DJANGO_SETTINGS_MODULE"] = "tests.oidcprovider.settings"

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.contrib.auth.models import User  # noqa: E402
from django.core.handlers.wsgi import WSGIHandler  # noqa: E402
from django.core.management import call_command  # noqa: E402
from oidc_provider.models import Client, ResponseType  # noqa: E402


def set_up() -> None:
    call_command("migrate", verbosity=0)
    call_command("creatersakey", stdout=open(os.devnull, "w"))
    for name, person in json.loads((settings.WORKDIR / "people.json").read_text()).items():
        User.objects.create_user(name, password=person["password"])
    client_id, _, secret = os.environ["OIDC_TEST_CLIENT"].partition(":")
    client = Client.objects.create(
        name="GPU Hive",
        client_id=client_id,
        client_secret=secret,
        client_type="confidential",
        jwt_alg="RS256",
        require_consent=False,
        _redirect_uris=os.environ["OIDC_TEST_REDIRECT_URI"],
    )
    client.response_types.set([ResponseType.objects.get(value="code")])


class Handler(WSGIRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 (the base class's name)
        sys.stdout.write(f"{format % args}\n")
        sys.stdout.flush()


if __name__ == "__main__":
    set_up()
    make_server("127.0.0.1", int(sys.argv[1]), WSGIHandler(), handler_class=Handler).serve_forever()
