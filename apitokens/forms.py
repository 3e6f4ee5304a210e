from datetime import timedelta

from django import forms
from django.utils import timezone

LIFETIMES = [("", "never"), ("7", "in 7 days"), ("30", "in 30 days"), ("90", "in 90 days"),
             ("365", "in a year")]  # fmt: skip


class NewTokenForm(forms.Form):
    name = forms.CharField(max_length=100, help_text="What it is for, e.g. 'laptop'.")
    expires = forms.ChoiceField(choices=LIFETIMES, required=False, label="Expires")

    def clean_expires(self):
        days = self.cleaned_data["expires"]
        return timezone.now() + timedelta(days=int(days)) if days else None
