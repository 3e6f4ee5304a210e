import getpass
import sys
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from accesscontrol.firstadmin import write_password_file
from accesscontrol.services import ensure_default_group
from monitoring.hostsfile import HostsFileError, read_hosts_file, save_hosts
from monitoring.setup import create_first_admin, register_localhost, write_site_settings


class Command(BaseCommand):
    help = (
        "Set up a new installation: public URL, first admin, this machine as host "
        "`localhost`, a hosts file, and the default group that may use every GPU. "
        "Asks on a terminal; every answer can be given as a flag for scripts."
    )

    def add_arguments(self, parser):
        parser.add_argument("--no-input", action="store_true", help="never ask; use flags/defaults")
        parser.add_argument(
            "--first-run", action="store_true", help="do nothing if an admin already exists"
        )
        parser.add_argument("--public-url", help="URL users open, e.g. https://gpus.example.org")
        parser.add_argument("--admin", default=None, help="first admin's user name (default admin)")
        parser.add_argument("--admin-email", default=None)
        parser.add_argument("--admin-password", default=None, help="generated when not given")
        parser.add_argument("--hosts-file", type=Path, help="TOML/INI hosts file to import")
        parser.add_argument("--no-localhost", action="store_true", help="don't register localhost")
        parser.add_argument(
            "--no-default-group", action="store_true", help="don't create the 'everyone' group"
        )

    def handle(self, **opts):
        has_admin = get_user_model().objects.filter(is_superuser=True).exists()
        if opts["first_run"] and has_admin:
            return
        self.interactive = not opts["no_input"] and sys.stdin.isatty()
        self._public_url(opts["public_url"])
        if not has_admin:
            self._admin(opts["admin"], opts["admin_email"], opts["admin_password"])
        if not opts["no_localhost"] and register_localhost():
            self.stdout.write("Registered this machine as host 'localhost' (no SSH needed).")
        self._hosts_file(opts["hosts_file"])
        if not opts["no_default_group"]:
            self._default_group()

    def ask(self, question: str, default: str) -> str:
        if not self.interactive:
            return default
        answer = input(f"{question} [{default}]: ").strip()
        return answer or default

    def _public_url(self, url):
        url = url or self.ask("Public URL of the service", "")
        if not url:
            return
        try:
            path = write_site_settings(url)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"Saved the public URL in {path} (restart to apply).")

    def _admin(self, username, email, password):
        username = username or self.ask("First admin's user name", "admin")
        email = email or self.ask("First admin's e-mail", "")
        if password is None and self.interactive:
            password = getpass.getpass("Password (empty: generate one): ") or None
        generated = password is None
        _, password = create_first_admin(username, email, password)
        self.stdout.write(
            self.style.SUCCESS(
                f"Created admin '{username}' with password: {password}\n"
                "(shown once; change it after logging in)"
            )
        )
        if generated:
            path = write_password_file(username, password)
            self.stdout.write(f"The password is also in {path} until {username} first signs in.")

    def _hosts_file(self, path):
        if path is None and self.interactive:
            answer = self.ask("Hosts file to import (TOML/INI, empty to skip)", "")
            path = Path(answer) if answer else None
        if path is None:
            return
        try:
            created, updated = save_hosts(read_hosts_file(path))
        except HostsFileError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"Hosts added: {len(created)}, updated: {len(updated)}.")

    def _default_group(self):
        group = ensure_default_group()
        self.stdout.write(f"Group '{group.name}' may use every GPU.")
