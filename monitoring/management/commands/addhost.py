from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from monitoring.hostsfile import HostsFileError, HostSpec, read_hosts_file, save_hosts
from monitoring.models import Host


class Command(BaseCommand):
    help = (
        "Register a host (or update it), or import many from a hosts file "
        "(TOML or INI: one [name] table per host with address, port, user)."
    )

    def add_arguments(self, parser):
        parser.add_argument("name", nargs="?", help="short host name, e.g. node-1")
        parser.add_argument("--address", help="DNS name or IP address")
        parser.add_argument("--port", type=int, default=22)
        parser.add_argument("--user", default="root", help="SSH account for monitoring")
        parser.add_argument(
            "--local", action="store_true", help="run probes locally, without SSH (localhost)"
        )
        parser.add_argument("--file", type=Path, help="import every host in this hosts file")

    def handle(self, name, address, port, user, local, file, **options):
        try:
            specs = (
                read_hosts_file(file) if file else [self._spec(name, address, port, user, local)]
            )
            created, updated = save_hosts(specs)
        except HostsFileError as exc:
            raise CommandError(str(exc)) from None
        for host in created:
            self.stdout.write(f"added {host}")
        for host in updated:
            self.stdout.write(f"updated {host}")
        if any(s.transport == Host.Transport.SSH for s in specs):
            self.stdout.write(
                "Next: put the key from `manage.py sshkey` in authorized_keys on the host(s), "
                "then check with `manage.py doctor`."
            )

    def _spec(self, name, address, port, user, local) -> HostSpec:
        if not name:
            raise CommandError("give a host NAME (with --address) or --file HOSTS_FILE")
        if not address and not local:
            raise CommandError("--address is required (or --local for this machine)")
        transport = Host.Transport.LOCAL if local else Host.Transport.SSH
        return HostSpec(name, address or "localhost", port, user, transport)
