"""What every command needs: the signed-in API, who we are, and JSON output for scripts."""

import json

import click

from . import config
from .api import Api, HiveError


def connect() -> tuple[Api, config.Config]:
    settings = config.load()
    if not settings.token:
        raise HiveError("Not signed in: run `hive login URL` first (or set HIVE_TOKEN).")
    return Api(settings.url, settings.token), settings


def whoami(api: Api, settings: config.Config) -> str:
    if settings.username:
        return settings.username
    tokens = api.get("tokens/")
    return tokens[0]["user"] if tokens else ""


def print_json(data) -> None:
    click.echo(json.dumps(data, indent=2))
