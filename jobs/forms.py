"""Forms of the job pages: task rows, a grid, a distributed template."""

from django import forms
from django.core.exceptions import ValidationError

from monitoring.models import Device, Host

from . import distributed, templating

ROWS = 6  # empty task rows offered by the form


def parse_pairs(text: str, what: str) -> dict[str, str]:
    """Lines ``name=value`` (the value is everything after the first '=', kept as is)."""
    pairs = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        name, sep, value = line.partition("=")
        if not sep or not name.strip():
            raise ValidationError(f"{what}, line {number}: write name=value.")
        pairs[name.strip()] = value
    return pairs


class PairsField(forms.CharField):
    widget = forms.Textarea(attrs={"rows": 2, "cols": 30, "placeholder": "name=value"})

    def __init__(self, what: str, **kwargs):
        self.what = what
        super().__init__(required=False, strip=False, **kwargs)

    def clean(self, value):
        return parse_pairs(super().clean(value) or "", self.what)


def _hosts():
    return forms.ModelChoiceField(Host.objects.filter(enabled=True), required=False)


def _gpus():
    return forms.ModelMultipleChoiceField(
        Device.objects.filter(status=Device.Status.PRESENT).select_related("host"),
        required=False,
        help_text="GPUs of the chosen host (none: a CPU task).",
    )


class JobForm(forms.Form):
    name = forms.CharField(max_length=200)
    description = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), required=False)
    template = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3, "cols": 80}),
        help_text="Shell command with {fields}, e.g. python train.py --lr {lr}. Values are "
        "shell-quoted; write {{ }} for literal braces.",
    )
    env = PairsField("Environment", label="Environment (all tasks)")
    scheduled_start = forms.DateTimeField(required=False, help_text="Start at (empty: by hand).")
    scheduled_stop = forms.DateTimeField(required=False, help_text="Stop at (TERM, then KILL).")

    def clean_template(self):
        template = self.cleaned_data["template"]
        templating.fields_of(template)
        return template


class TaskRowForm(forms.Form):
    host = _hosts()
    devices = _gpus()
    parameters = PairsField("Parameters")
    env = PairsField("Environment")


TaskRowFormSet = forms.formset_factory(TaskRowForm, extra=ROWS, max_num=500)


class GridForm(JobForm):
    # The guided order: what to run, where, with which values, then when.
    field_order = ["name", "template", "description", "host", "devices", "values", "samples",
                   "seed", "env", "scheduled_start", "scheduled_stop"]  # fmt: skip
    host = forms.ModelChoiceField(Host.objects.filter(enabled=True))
    devices = _gpus()
    values = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 4, "placeholder": "lr: 0.1, 0.01\nbatch: 32, 64"}),
        help_text="One line per field: name: value1, value2, ...",
    )
    samples = forms.IntegerField(required=False, min_value=1, help_text="Empty: the full grid.")
    seed = forms.IntegerField(required=False)

    def clean_values(self):
        return templating.parse_value_lists(self.cleaned_data["values"])


class DistributedForm(forms.Form):
    name = forms.CharField(max_length=200)
    description = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), required=False)
    kind = forms.ChoiceField(choices=list(distributed.KINDS.items()), label="Template")
    hosts = forms.ModelMultipleChoiceField(
        Host.objects.filter(enabled=True),
        help_text="One task per host; the first by name is the master.",
    )
    devices = _gpus()
    launcher = forms.CharField(initial="torchrun", required=False, help_text="torchrun only.")
    nproc_per_node = forms.IntegerField(initial=1, min_value=1, help_text="torchrun only.")
    command = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 2, "cols": 80}),
        help_text="torchrun: the script and its arguments; otherwise the whole command.",
    )
    parameters = PairsField("Parameters")
    env = PairsField("Environment")
