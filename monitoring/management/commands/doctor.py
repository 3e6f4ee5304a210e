from django.core.management.base import BaseCommand, CommandError

from monitoring.doctor import check_host
from monitoring.models import Host


class Command(BaseCommand):
    help = "Check every host (or the named ones): SSH login, host key, nvidia-smi, screen, ps."

    def add_arguments(self, parser):
        parser.add_argument("hosts", nargs="*", help="host names (default: all enabled hosts)")

    def handle(self, hosts, **options):
        queryset = (
            Host.objects.filter(name__in=hosts) if hosts else Host.objects.filter(enabled=True)
        )
        missing = set(hosts) - set(queryset.values_list("name", flat=True))
        if missing:
            raise CommandError(f"no host named {', '.join(sorted(missing))}")
        failed = 0
        for host in queryset:
            self.stdout.write(f"{host.name} ({host.username}@{host.address}:{host.port})")
            for check in check_host(host):
                mark = "ok  " if check.ok else "FAIL"
                self.stdout.write(f"  {mark} {check.name}: {check.detail}")
                if check.fix:
                    self.stdout.write(f"       fix: {check.fix}")
                failed += not check.ok
        if failed:
            raise CommandError(f"{failed} check(s) failed")
        self.stdout.write("all checks passed")
