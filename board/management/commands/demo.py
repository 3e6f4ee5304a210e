from django.core.management.base import BaseCommand, CommandError

from accounting.rollup import compute_recent
from board.demo import seed


class Command(BaseCommand):
    help = (
        "Seed a demo lab (hosts demo-NNN with GPUs and history, users, bookings, running "
        "jobs) for trying the pages. Refuses to run twice."
    )

    def add_arguments(self, parser):
        parser.add_argument("--hosts", type=int, default=12)
        parser.add_argument("--gpus", type=int, default=8, help="GPUs per host")
        parser.add_argument("--history-hours", type=int, default=6)
        parser.add_argument("--down", type=int, default=None, help="hosts shown down")

    def handle(self, *args, hosts, gpus, history_hours, down, **options):
        if not (1 <= hosts <= 1000 and 1 <= gpus <= 16 and 0 <= history_hours <= 168):
            raise CommandError("--hosts 1-1000, --gpus 1-16, --history-hours 0-168.")
        try:
            made = seed(hosts, gpus, history_hours, down=down)
        except ValueError as error:
            raise CommandError(str(error)) from None
        # The usage figures the workers would roll up within a quarter hour, at once, so the
        # usage page has something to show.
        compute_recent()
        self.stdout.write(
            f"Demo lab: {made['hosts']} hosts, {made['gpus']} GPUs; users "
            f"{', '.join(made['users'])}, each with the password {made['password']!r}."
        )
