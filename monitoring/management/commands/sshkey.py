from django.core.management.base import BaseCommand

from monitoring.keys import public_key_line


class Command(BaseCommand):
    help = (
        "Print the service's public SSH key. Append it to ~/.ssh/authorized_keys of the "
        "monitoring account on each host (and of each user who runs jobs)."
    )

    def handle(self, **options):
        self.stdout.write(public_key_line())
