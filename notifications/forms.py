"""A channel as its owner edits it: kind, target, events wanted."""

from urllib.parse import urlsplit

from django import forms
from django.core.validators import validate_email

from .models import EVENTS, Channel


class ChannelForm(forms.ModelForm):
    events = forms.MultipleChoiceField(
        choices=list(EVENTS.items()), widget=forms.CheckboxSelectMultiple, required=False
    )

    class Meta:
        model = Channel
        fields = ["kind", "target", "events", "enabled"]
        help_texts = {
            "target": "The webhook's URL (https://…), or for mail an address (empty: yours)."
        }

    def clean(self):
        data = super().clean()
        check_target(data.get("kind"), data.get("target", ""))
        return data


def check_target(kind: str | None, target: str) -> None:
    """The one check of a channel's target, for the page and the API."""
    if kind == Channel.Kind.EMAIL:
        if target:
            try:
                validate_email(target)
            except forms.ValidationError:
                raise forms.ValidationError({"target": "Enter a mail address."}) from None
        return
    parts = urlsplit(target or "")
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise forms.ValidationError({"target": "Enter the webhook's http(s):// URL."})
