"""The first run's public URL defaults to the address `serve` will serve (bin/serve passes its
arguments to `init --serve-args`), so links in mail and chat lead to the service."""

import socket
import sys
from io import StringIO

import pytest
from django.core.management import call_command

from monitoring.setup import configured_public_url


@pytest.fixture
def data_dir(settings, tmp_path, monkeypatch):
    settings.HIVE_DATA_DIR = tmp_path
    monkeypatch.delenv("PUBLIC_URL", raising=False)
    return tmp_path


def init(*args) -> str:
    out = StringIO()
    admin = ["--admin", "chief", "--admin-email", "", "--admin-password", "pw-chief-1"]
    call_command("init", "--no-localhost", "--no-default-group", *admin, *args, stdout=out)
    return out.getvalue()


def env_file(data_dir) -> dict:
    lines = (data_dir / "hive.env").read_text().splitlines()
    return dict(line.partition("=")[::2] for line in lines)


def test_it_saves_the_served_port_without_asking(db, data_dir):
    init("--no-input", "--serve-args", "--port", "8500")
    assert env_file(data_dir)["PUBLIC_URL"] == "http://localhost:8500"
    assert configured_public_url() == "http://localhost:8500"


def test_serving_on_every_address_names_this_machine(db, data_dir):
    init("--no-input", "--serve-args", "--bind", "0.0.0.0", "--port", "8080")
    saved = env_file(data_dir)
    assert saved["PUBLIC_URL"] == f"http://{socket.getfqdn()}:8080"
    assert socket.getfqdn() in saved["ALLOWED_HOSTS"].split(",")


def test_the_question_offers_the_served_address(db, data_dir, monkeypatch):
    prompts = []
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True)
    monkeypatch.setattr("builtins.input", lambda prompt: prompts.append(prompt) or "")
    init("--serve-args", "--bind", "127.0.0.1", "--port", "8500")
    assert prompts[0] == "Public URL of the service [http://localhost:8500]: "
    assert env_file(data_dir)["PUBLIC_URL"] == "http://localhost:8500"


def test_a_configured_url_stays(db, data_dir, monkeypatch):
    monkeypatch.setenv("PUBLIC_URL", "https://gpus.example.org")
    init("--no-input", "--serve-args", "--port", "8500")
    assert not (data_dir / "hive.env").exists()


def test_without_serve_arguments_nothing_is_guessed(db, data_dir):
    init("--no-input")
    assert not (data_dir / "hive.env").exists()
