"""Forms of the job pages: task rows, a grid, a distributed template."""

from django import forms
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError

from allocation.placement import MAX_GPUS_PER_TASK, Kind
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


Where = Kind


def _time(label: str, help_text: str):
    # The browser's own date and time picker; read in the reader's time zone.
    widget = forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M")
    return forms.DateTimeField(required=False, label=label, help_text=help_text, widget=widget)


class NewJobForm(forms.Form):
    """The guided "New job" form, in the order people think of a run: the command, where it
    runs (GPUs picked on a list, or "N GPUs" the service picks), the values it is run with,
    and when it starts (queued until its GPUs are free, now, at a set time, or by hand).
    Fields that belong to an option not chosen are ignored (see ``clean``)."""

    QUEUE, NOW, AT, BY_HAND = "queue", "now", "at", "hand"
    WHERE = {
        Where.ONE_HOST: (
            "N GPUs on one host",
            "The service picks free GPUs for you, all on one host.",
        ),
        Where.ANY_HOSTS: (
            "N GPUs anywhere",
            "Spread over several hosts if no single one has enough: the command then runs "
            "once per host, with HIVE_NODE_RANK, HIVE_NNODES and HIVE_MASTER_ADDR set.",
        ),
        Where.DEVICES: (
            "GPUs I pick on the list",
            "See what each GPU is doing now and tick the ones to use (none: a task without "
            "GPUs on the chosen host).",
        ),
    }
    WHEN = {
        QUEUE: (
            "As soon as the GPUs are free",
            "It waits in the queue and starts by itself (each task of a sweep on its own, as "
            "GPUs free up); the queue page says why it waits.",
        ),
        NOW: (
            "Now",
            "Starts right away; if the GPUs cannot be used now, you are told why and nothing "
            "is created.",
        ),
        AT: ("At a set time", "Starts at the time you give (only with GPUs you pick)."),
        BY_HAND: (
            "Not yet",
            "Creates it; you check each task's command on the next page and start it there "
            "(only with GPUs you pick).",
        ),
    }
    # "N GPUs" are chosen when the job starts, so only the queue or a start now can choose them.
    PICKED_ONLY = (AT, BY_HAND)

    # 1. What to run
    template = forms.CharField(
        label="Command",
        widget=forms.Textarea(
            attrs={
                "rows": 3,
                "placeholder": "for example: python train.py --lr {lr} --batch {batch}",
            }
        ),
        help_text="The shell command, as you would type it on the host. Write {name} where a "
        "value from step 3 goes: each value is quoted for the shell, so it arrives as one "
        "argument. Write {{ and }} for braces that are really braces.",
    )
    name = forms.CharField(
        max_length=200,
        required=False,
        help_text="To find it again in the lists. Empty: the start of the command.",
    )
    description = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), required=False)
    # 2. Where
    where = forms.ChoiceField(
        label="Which GPUs",
        choices=[(key, label) for key, (label, _) in WHERE.items()],
        initial=Where.ONE_HOST,
        widget=forms.RadioSelect,
    )
    gpu_count = forms.IntegerField(
        label="How many GPUs", min_value=1, max_value=MAX_GPUS_PER_TASK, initial=1
    )
    host = forms.ModelChoiceField(
        Host.objects.filter(enabled=True),
        required=False,
        empty_label="Any host",
    )
    devices = _gpus()
    gpu_model = forms.CharField(
        max_length=100, required=False, label="GPU model contains", help_text="For example A100."
    )
    # Bounded like the column (PositiveIntegerField): a larger number would be a 500.
    min_memory_mib = forms.IntegerField(
        min_value=1, max_value=2**31 - 1, required=False, label="At least this much memory (MiB)"
    )
    # 3. With which values
    values = forms.CharField(
        required=False,
        label="Values",
        widget=forms.Textarea(
            attrs={"rows": 4, "placeholder": "for example:\nlr: 0.1, 0.01\nbatch: 32, 64"}
        ),
        help_text="One line per {name} of the command: name: value1, value2, ... One task is "
        "made for every combination. Empty: one task (a command without {names}).",
    )
    samples = forms.IntegerField(
        required=False,
        min_value=1,
        help_text="Only this many combinations, drawn at random. Empty: all of them.",
    )
    seed = forms.IntegerField(
        required=False, help_text="The same seed draws the same combinations again."
    )
    env = PairsField(
        "Environment",
        label="Environment variables",
        help_text="NAME=value, one per line, set for every task.",
        widget=forms.Textarea(attrs={"rows": 2, "placeholder": "for example: OMP_NUM_THREADS=4"}),
    )
    # 4. When
    when = forms.ChoiceField(
        label="When it starts",
        choices=[(key, label) for key, (label, _) in WHEN.items()],
        initial=QUEUE,
        widget=forms.RadioSelect,
    )
    scheduled_start = _time("Start at", "In your time zone.")
    scheduled_stop = _time("Stop at", "Optional: stopped then (TERM, then KILL).")
    priority = forms.IntegerField(
        initial=0, required=False, help_text="Higher starts first (within your limit)."
    )
    opportunistic = forms.BooleanField(
        required=False, help_text="Beyond your group's quota, on spare GPUs; preempted first."
    )
    requeue_on_preemption = forms.BooleanField(
        required=False, initial=True, label="Requeue when preempted"
    )
    group = forms.ModelChoiceField(
        Group.objects.none(),
        required=False,
        empty_label="Your default group",
        help_text="Whose quota it counts against.",
    )

    def __init__(self, *args, user=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["group"].queryset = Group.objects.filter(user=user).order_by("name")

    def clean_template(self):
        template = self.cleaned_data["template"]
        templating.fields_of(template)
        return template

    def clean_values(self):
        return templating.parse_value_lists(self.cleaned_data["values"])

    def clean_env(self):
        return templating.check_env(self.cleaned_data["env"])

    def clean(self):
        data = super().clean()
        where, when = data.get("where"), data.get("when")
        if where == Where.DEVICES:
            data.update(gpu_model="", min_memory_mib=None)
        else:
            data["devices"] = []  # the list's ticks belong to "GPUs I pick"
            if when in self.PICKED_ONLY:
                self.add_error(
                    "when",
                    f"'{self.WHEN[when][0]}' needs GPUs you pick on the list: the service picks "
                    "'N GPUs' only as the job starts. Choose 'As soon as the GPUs are free' "
                    "or 'Now', or pick the GPUs.",
                )
        if where == Where.ANY_HOSTS:
            data["host"] = None
        if when != self.AT:
            data["scheduled_start"] = None
        elif not data.get("scheduled_start"):
            self.add_error("scheduled_start", "Say when it starts.")
        if when == self.QUEUE:
            data["scheduled_stop"] = None
        if "template" in data and not data.get("name", "").strip():
            data["name"] = default_name(data["template"])
        return data

    # The radio buttons of "where" and "when", each with its help in plain words.
    @property
    def where_options(self) -> list:
        return [(choice, self.WHERE[choice.data["value"]][1]) for choice in self["where"]]

    @property
    def when_options(self) -> list:
        return [(choice, self.WHEN[choice.data["value"]][1]) for choice in self["when"]]


def default_name(command: str) -> str:
    first = command.strip().splitlines()[0] if command.strip() else "job"
    return first if len(first) <= 60 else first[:59] + "…"


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
