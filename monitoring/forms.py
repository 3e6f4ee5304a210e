"""Validation of what dashboards send back (their layout), with messages users can act on."""

from django import forms

from .models import DashboardLayout, Host


class LayoutForm(forms.Form):
    """A dashboard layout: chart keys in order (no repeats), host ids to hide."""

    charts = forms.JSONField()
    hidden_hosts = forms.JSONField()

    def clean_charts(self):
        charts = self.cleaned_data["charts"]
        if not isinstance(charts, list) or not all(isinstance(c, str) for c in charts):
            raise forms.ValidationError("Send a list of chart names.")
        unknown = sorted(set(charts) - set(DashboardLayout.CHARTS))
        if unknown:
            known = ", ".join(DashboardLayout.CHARTS)
            raise forms.ValidationError(f"Unknown chart(s): {', '.join(unknown)}. Known: {known}.")
        if len(set(charts)) != len(charts):
            raise forms.ValidationError("Each chart may appear once.")
        return charts

    def clean_hidden_hosts(self):
        ids = self.cleaned_data["hidden_hosts"]
        if not isinstance(ids, list) or not all(type(i) is int for i in ids):
            raise forms.ValidationError("Send a list of host ids (integers).")
        missing = sorted(
            set(ids) - set(Host.objects.filter(pk__in=ids).values_list("pk", flat=True))
        )
        if missing:
            raise forms.ValidationError(f"No host with id {', '.join(map(str, missing))}.")
        return sorted(set(ids))
