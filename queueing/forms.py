"""The queue page's form: one task (the API takes several)."""

from django import forms
from django.contrib.auth.models import Group

from jobs.forms import PairsField
from monitoring.models import Device, Host

from .models import QueuedTask


class EnqueueForm(forms.Form):
    name = forms.CharField(max_length=200)
    template = forms.CharField(
        label="Command",
        widget=forms.Textarea(attrs={"rows": 3, "cols": 80}),
        help_text="Shell command, e.g. python train.py --epochs 90. Write {{ }} for braces.",
    )
    env = PairsField("Environment", label="Environment")
    kind = forms.ChoiceField(
        label="GPUs", choices=QueuedTask.Kind.choices, initial=QueuedTask.Kind.ONE_HOST
    )
    gpu_count = forms.IntegerField(label="How many", min_value=1, max_value=64, initial=1)
    host = forms.ModelChoiceField(
        Host.objects.filter(enabled=True), required=False, help_text="Only this host (optional)."
    )
    devices = forms.ModelMultipleChoiceField(
        Device.objects.filter(status=Device.Status.PRESENT).select_related("host"),
        required=False,
        help_text="For 'These GPUs' (all on one host).",
    )
    gpu_model = forms.CharField(max_length=100, required=False, label="GPU model contains")
    # Bounded like the column (PositiveIntegerField): a larger number would be a 500.
    min_memory_mib = forms.IntegerField(
        min_value=1, max_value=2**31 - 1, required=False, label="At least MiB"
    )
    priority = forms.IntegerField(initial=0, help_text="Higher starts first (within your limit).")
    opportunistic = forms.BooleanField(
        required=False, help_text="Beyond your group's quota, on spare GPUs; preempted first."
    )
    requeue_on_preemption = forms.BooleanField(
        required=False, initial=True, label="Requeue when preempted"
    )
    group = forms.ModelChoiceField(
        Group.objects.none(), required=False, help_text="Whose quota it counts against."
    )

    def __init__(self, *args, user=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["group"].queryset = Group.objects.filter(user=user).order_by("name")
