import argparse
import getpass
import os
import sys
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from accesscontrol.accounts import service_account
from accesscontrol.firstadmin import write_password_file
from accesscontrol.models import RunAsAllowance
from accesscontrol.services import ensure_default_group, profile_for
from monitoring import localaccounts
from monitoring.hostsfile import HostsFileError, read_hosts_file, save_hosts
from monitoring.management.commands.serve import Command as Serve
from monitoring.models import Host
from monitoring.setup import (
    configured_public_url,
    create_first_admin,
    register_localhost,
    served_url,
    write_site_settings,
)


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
        parser.add_argument(
            "--admin-unix-user",
            default=None,
            help="UNIX account the first admin's tasks run as (default: whoever runs init, "
            "$SUDO_USER under sudo)",
        )
        parser.add_argument(
            "--localhost-over-ssh",
            action="store_true",
            help="reach this machine over SSH (so tasks run as each user's own account) "
            "when the service does not run as root",
        )
        parser.add_argument(
            "--serve-args",
            nargs=argparse.REMAINDER,
            default=None,
            help="last: the arguments `serve` will run with (bin/serve passes its own); the "
            "public URL defaults to the address they serve",
        )

    def handle(self, **opts):
        has_admin = get_user_model().objects.filter(is_superuser=True).exists()
        if opts["first_run"] and has_admin:
            return
        self.interactive = not opts["no_input"] and sys.stdin.isatty()
        self._public_url(opts["public_url"], opts["serve_args"])
        if not has_admin:
            admin = self._admin(opts["admin"], opts["admin_email"], opts["admin_password"])
            self._admin_account(admin, opts["admin_unix_user"])
        if not opts["no_localhost"]:
            if register_localhost():
                self.stdout.write("Registered this machine as host 'localhost' (no SSH needed).")
            self._local_tasks(opts["localhost_over_ssh"])
        self._hosts_file(opts["hosts_file"])
        if not opts["no_default_group"]:
            self._default_group()

    def ask(self, question: str, default: str) -> str:
        if not self.interactive:
            return default
        answer = input(f"{question} [{default}]: ").strip()
        return answer or default

    def _public_url(self, url, serve_args):
        """Asked with what is configured as the default, else the address `serve` will serve:
        links in mail and chat must lead to where the service is."""
        current = configured_public_url()
        default = current or (self._served(serve_args) if serve_args is not None else "")
        url = url or self.ask("Public URL of the service", default)
        if not url or url == current:
            return
        try:
            path = write_site_settings(url)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"Saved the public URL in {path} (restart to apply).")

    @staticmethod
    def _served(serve_args: list[str]) -> str:
        """The URL of the address serve's own parser reads from its arguments."""
        options, _ = Serve().create_parser("manage.py", "serve").parse_known_args(serve_args)
        return served_url(options.bind, options.port)

    def _admin(self, username, email, password):
        username = username or self.ask("First admin's user name", "admin")
        email = email or self.ask("First admin's e-mail", "")
        if password is None and self.interactive:
            password = getpass.getpass("Password (empty: generate one): ") or None
        generated = password is None
        admin, password = create_first_admin(username, email, password)
        self.stdout.write(
            self.style.SUCCESS(
                f"Created admin '{username}' with password: {password}\n"
                "(shown once; change it after logging in)"
            )
        )
        if generated:
            path = write_password_file(username, password)
            self.stdout.write(f"The password is also in {path} until {username} first signs in.")
        return admin

    def _admin_account(self, admin, name):
        """The first admin is whoever set the service up: their tasks run as that account."""
        name = name or os.environ.get("SUDO_USER") or getpass.getuser()
        if name == "root":
            self.stdout.write(
                f"Admin '{admin}' has no UNIX account to run tasks as yet (set one on the "
                "profile, or with --admin-unix-user; tasks never run as root by default)."
            )
            return
        profile = profile_for(admin)
        profile.unix_username = name
        profile.save(update_fields=["unix_username"])
        self.stdout.write(f"Admin '{admin}' runs tasks as UNIX account '{name}'.")
        self.admin_unix_name = name

    def _local_tasks(self, over_ssh: bool):
        """Without root, tasks on localhost can only run as the service's account: say so,
        and offer to reach this machine over SSH instead (each user's own account then)."""
        if localaccounts.service_is_root():
            self.stdout.write("Tasks on 'localhost' run as each user's own UNIX account.")
            return
        me = localaccounts.service_account()
        if getattr(self, "admin_unix_name", None) == me == service_account():
            # A single-user install: the service runs as the admin who set it up, who may run
            # jobs as themselves on this machine (refused otherwise: accesscontrol.accounts).
            RunAsAllowance.objects.get_or_create(
                unix_username=me,
                host=Host.objects.get(name="localhost"),
                defaults={"reason": "init: the service runs as its admin's own account"},
            )
        self.stdout.write(
            f"This service does not run as root, so tasks on 'localhost' can run only as "
            f"'{me}'. To run them as each user's own account, run the service as root, or "
            "reach this machine over SSH."
        )
        if not over_ssh and not self.ask("Reach localhost over SSH? (y/N)", "n").startswith("y"):
            return
        Host.objects.filter(name="localhost").update(
            transport=Host.Transport.SSH, address="127.0.0.1", username=me
        )
        self.stdout.write(
            "'localhost' is now reached over SSH at 127.0.0.1. Next: add the key from "
            "`manage.py sshkey` to ~/.ssh/authorized_keys of each user who runs jobs (and of "
            f"'{me}', for monitoring), then check with `manage.py doctor`."
        )

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
