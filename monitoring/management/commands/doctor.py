from django.core import checks
from django.core.management.base import BaseCommand, CommandError

from monitoring.dbversion import UPGRADE_TAG
from monitoring.doctor import check_host, where
from monitoring.models import Host


class Command(BaseCommand):
    help = (
        "Check that this code may run on its database and what an upgrade left for the admin, "
        "then every host (or the named ones): SSH login, host key, nvidia-smi, screen, ps. "
        "Exit status: 0 when nothing is wrong (warnings, e.g. a CPU-only host, included), "
        "1 when a check failed or a host is unknown."
    )

    def add_arguments(self, parser):
        parser.add_argument("hosts", nargs="*", help="host names (default: all enabled hosts)")

    def handle(self, hosts, **options):
        queryset = (
            Host.objects.filter(name__in=hosts) if hosts else Host.objects.filter(enabled=True)
        )
        missing = set(hosts) - set(queryset.values_list("name", flat=True))
        if missing:
            raise CommandError(f"no host named {', '.join(sorted(missing))}")
        failed, warned = 0, self._service()
        for host in queryset:
            self.stdout.write(f"{host.name} ({where(host)})")
            for check in check_host(host):
                mark = "ok  " if check.ok else "WARN" if check.warning else "FAIL"
                self.stdout.write(f"  {mark} {check.name}: {check.detail}")
                if check.fix and not check.warning:
                    self.stdout.write(f"       fix: {check.fix}")
                failed += not check.ok and not check.warning
                warned += check.warning
        if failed:
            raise CommandError(f"{failed} check(s) failed")
        self.stdout.write(
            f"all checks passed, {warned} warning(s)" if warned else "all checks passed"
        )

    def _service(self) -> int:
        """This code and its database: a newer version's database stops the doctor (its
        findings would be about rows it misreads); what an upgrade left is a warning each."""
        issues = checks.run_checks(tags=[UPGRADE_TAG], databases=["default"])
        if not issues:
            return 0
        self.stdout.write("this service (its code and database)")
        for issue in issues:
            serious = issue.level >= checks.ERROR
            self.stdout.write(f"  {'FAIL' if serious else 'WARN'} {issue.msg}")
            if issue.hint:
                self.stdout.write(f"       {'fix' if serious else 'what to do'}: {issue.hint}")
        if any(issue.level >= checks.ERROR for issue in issues):
            raise CommandError("this version cannot run on this database; no host was checked")
        return len(issues)
