from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from jobs import templating


class Command(BaseCommand):
    help = (
        "Print one command per combination of parameter values (or --samples of them), "
        "values shell-quoted, ready to pipe into `manage.py gpurun`."
    )

    def add_arguments(self, parser):
        parser.add_argument("template", help='e.g. "python train.py --lr {lr} --bs {bs}"')
        parser.add_argument(
            "-p",
            "--param",
            nargs="+",
            action="append",
            default=[],
            metavar=("NAME", "VALUE"),
            help="a parameter and its values",
        )
        parser.add_argument("--samples", type=int, help="this many random combinations")
        parser.add_argument("--seed", type=int, help="seed for --samples (same seed, same set)")

    def handle(self, template, param, samples, seed, **options):
        values = {}
        for entry in param:
            if len(entry) < 2:
                raise CommandError(f"-p {entry[0]} needs at least one value")
            values[entry[0]] = entry[1:]
        # gpurun reads one command per line: a line break would cut a command in two.
        texts = [template, *(v for options in values.values() for v in options)]
        broken = [text for text in texts if "\n" in text or "\r" in text]
        if broken:
            raise CommandError(
                f"{broken[0]!r} holds a line break; gpurun reads one command per line"
            )
        try:
            unknown = set(values) - set(templating.fields_of(template))
            if unknown:
                raise ValidationError(f"{{{sorted(unknown)[0]}}} is not in the template")
            for combo in templating.grid(values, samples, seed):
                self.stdout.write(templating.render(template, combo))
        except ValidationError as exc:
            raise CommandError(" ".join(exc.messages)) from None
