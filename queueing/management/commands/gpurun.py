import getpass
import sys

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.template.defaultfilters import pluralize

from accesscontrol.owners import service_user
from monitoring.models import Device, Host
from queueing.gpurun import Runner


def parse_gpus(text: str) -> list[int]:
    try:
        indices = [int(part) for part in text.replace(" ", ",").split(",") if part]
    except ValueError:
        raise CommandError(f"--gpus takes GPU indices like 0,1,2, not {text!r}") from None
    if not indices or len(set(indices)) != len(indices):
        raise CommandError("--gpus needs at least one GPU index, each once")
    return indices


class Command(BaseCommand):
    help = (
        "Run each line of standard input as a task on one free GPU among --gpus "
        "(CUDA_VISIBLE_DEVICES set to it), starting the next as soon as one ends; GPUs "
        "reserved by someone else or with foreign processes are skipped. Reads a pipe, a FIFO "
        "or `tail -f` as lines come. Everything is recorded as one job."
    )

    stealth_options = ("stdin",)  # tests pass the stream in
    # The service checks its settings where it starts (serve, the workers); checking them
    # here imported every URL, view and admin (a second of CPU, 35 MB) before the first start.
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument("--gpus", required=True, help="GPU indices on the host, e.g. 0,1,2")
        parser.add_argument("--host", default="localhost", help="host name (default localhost)")
        parser.add_argument(
            "--user",
            help="service user to run as (default: the one whose "
            "UNIX account on the host runs this command)",
        )
        parser.add_argument("--name", help="the job's name (default: gpurun on HOST)")

    def handle(self, gpus, host, user, name, **options):
        target = Host.objects.filter(name=host).first()
        if target is None:
            raise CommandError(f"no host named {host!r}; see `manage.py addhost`")
        devices = self.devices(target, parse_gpus(gpus))
        owner = self.owner(target, user)
        runner = Runner(
            target,
            owner,
            devices,
            self.stdout,
            name=name or f"gpurun on {host}",
        )
        code = runner.run(options.get("stdin") or sys.stdin)
        if code and len(runner.given_up) == len(devices):
            raise CommandError(
                f"{owner} can never use GPU{pluralize(devices)} {gpus} on {host}: ask an admin "
                "for access",
                returncode=code,
            )
        if code:
            commands = f"{runner.started} command{pluralize(runner.started)}"
            raise CommandError(f"{runner.failed} of {commands} failed", returncode=code)

    def devices(self, host: Host, indices: list[int]) -> list[Device]:
        # GPUs by index (a MIG slice shares its GPU's index; gpurun names whole GPUs).
        gpus = host.devices.filter(status=Device.Status.PRESENT, parent=None)
        present = {d.index: d for d in gpus}
        missing = [i for i in indices if i not in present]
        if missing:
            known = ", ".join(map(str, sorted(present))) or "none"
            raise CommandError(f"{host} has no GPU {missing[0]} (GPUs: {known})")
        return [present[i] for i in indices]

    def owner(self, host: Host, username: str | None):
        if username:
            user = get_user_model().objects.filter(username=username).first()
            if user is None:
                raise CommandError(f"no user named {username!r}")
            return user
        unix = getpass.getuser()
        user = service_user(host, unix)
        if user is None:
            raise CommandError(
                f"no service user has the UNIX account {unix!r} on {host}: pass --user"
            )
        return user
