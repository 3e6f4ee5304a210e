from django.core.management.base import BaseCommand, CommandError

from accounting.rollup import compute_recent
from board.demo import remove, seed


class Command(BaseCommand):
    help = (
        "Seed a demo lab (simulated hosts demo-NNN with GPUs and history, users, bookings, "
        "running jobs) that stays live beside the service; --remove takes it away. Refuses "
        "to run twice."
    )

    def add_arguments(self, parser):
        parser.add_argument("--hosts", type=int, default=12)
        parser.add_argument("--gpus", type=int, default=8, help="GPUs per host")
        parser.add_argument("--history-hours", type=int, default=6)
        parser.add_argument("--down", type=int, default=None, help="hosts in trouble")
        parser.add_argument(
            "--remove",
            action="store_true",
            help="remove the demo lab: its hosts, people, bookings, jobs and history",
        )

    def handle(self, *args, hosts, gpus, history_hours, down, remove, **options):
        if remove:
            self.remove()
            return
        if not (1 <= hosts <= 1000 and 1 <= gpus <= 16 and 0 <= history_hours <= 168):
            raise CommandError("--hosts 1-1000, --gpus 1-16, --history-hours 0-168.")
        if down is not None and not 0 <= down < hosts:
            raise CommandError("--down 0 to one less than --hosts (one host at least answers).")
        try:
            made = seed(hosts, gpus, history_hours, down=down)
        except ValueError as error:
            raise CommandError(str(error)) from None
        # The usage figures the workers would roll up within a quarter hour, at once, so the
        # usage page has something to show.
        compute_recent()
        self.stdout.write(
            f"Demo lab: {made['hosts']} simulated hosts, {made['gpus']} GPUs; users "
            f"{', '.join(made['users'])}, each with the password {made['password']!r}. "
            "`manage.py demo --remove` takes it away."
        )

    def remove(self):
        gone = remove()
        if not gone["hosts"] and not gone["users"]:
            self.stdout.write("No demo lab here: nothing removed.")
            return
        self.stdout.write(
            f"Removed the demo lab: {len(gone['hosts'])} hosts and the people it made "
            f"({', '.join(gone['users']) or 'none'}), with their bookings, jobs and history."
        )
