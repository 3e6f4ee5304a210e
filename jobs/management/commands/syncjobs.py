from django.core.management.base import BaseCommand

from jobs import tasks


class Command(BaseCommand):
    help = (
        "Check the running tasks on their hosts once and run scheduled starts and stops that "
        "are due: what the workers do after each monitoring cycle."
    )

    def handle(self, *args, **options):
        self.stdout.write(tasks.after_cycle())
