"""A channel as its owner edits it: kind, target, events wanted. The rules are the
model's (Channel.clean): what it may point at, and how many one user may have."""

from django import forms

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

    def __init__(self, *args, user=None, **kwargs):
        super().__init__(*args, **kwargs)
        if user is not None:  # a new channel's owner, for the cap on channels
            self.instance.user = user
