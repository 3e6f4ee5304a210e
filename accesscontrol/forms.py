"""Forms of the access pages: choosing what the week grid shows, and self-sign-up."""

from django import forms
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.forms import UserCreationForm
from django.contrib.auth.models import Group

from core.clients import Limit, wait_text
from core.zones import check_calendar_year
from monitoring.models import username_validator

from .models import Profile
from .signup import SignupRefused, check_claim, check_uid, prove_unix_account, signup_hosts


class WeekForm(forms.Form):
    """Which week, and (for operators and host admins) whose access."""

    week = forms.DateField(
        required=False, validators=[check_calendar_year], help_text="Any day of the week to show."
    )
    user = forms.ModelChoiceField(get_user_model().objects.order_by("username"), required=False)
    group = forms.ModelChoiceField(Group.objects.order_by("name"), required=False)

    def clean(self):
        data = super().clean()
        if data.get("user") and data.get("group"):
            raise forms.ValidationError("Choose a user or a group, not both.")
        return data


class SignupForm(UserCreationForm):
    """A new account named after a UNIX account the user proves to own on a host."""

    host = forms.ModelChoiceField(queryset=None, help_text="A host where you have an account.")

    class Meta(UserCreationForm.Meta):
        model = get_user_model()
        fields = ["username", "email"]
        labels = {"username": "UNIX user name on that host"}

    def __init__(self, *args, code: str, address: str, **kwargs):
        super().__init__(*args, **kwargs)
        self.code = code  # the one-time code this visitor was shown
        self.address = address  # who asks (core.clients.client_address)
        self.uid = None
        self.fields["host"].queryset = signup_hosts()
        self.fields["username"].validators.append(username_validator)
        self.fields["email"].required = True

    def _post_clean(self):
        super()._post_clean()  # passwords are checked here, before we try to log in anywhere
        if self.errors:
            return
        username, host = self.cleaned_data["username"], self.cleaned_data["host"]
        try:
            check_claim(host, username)
            self._count_try(username)
            check_uid(host, username, prove_unix_account(host, username, self.code))
        except SignupRefused as exc:
            self.add_error(None, str(exc))

    def _count_try(self, username: str) -> None:
        """Each proof is an SSH login: limited per address and per claimed name."""
        for scope, key in (("signup-address", self.address), ("signup-name", username)):
            wait = Limit(scope, settings.SIGNUP_ATTEMPTS, 3600).take(key)
            if wait:
                raise SignupRefused(f"Too many sign-up attempts; try again in {wait_text(wait)}.")


class TimeZoneForm(forms.ModelForm):
    """The one thing users set on their own profile: the zone times are shown in."""

    class Meta:
        model = Profile
        fields = ["time_zone"]
        widgets = {"time_zone": forms.TextInput(attrs={"list": "time-zones", "size": 32})}
