"""Validation of what dashboards send back (their layout), with messages users can act on."""

from django import forms

from core.ids import MAX_ID

from .models import DashboardLayout, Host


class ListField(forms.JSONField):
    """JSON where an empty list is a value ("no charts", "no hidden hosts"), not a missing one."""

    empty_values = [None, ""]


class LayoutForm(forms.Form):
    """A dashboard layout: chart keys in order (no repeats), host ids to hide."""

    charts = ListField()
    hidden_hosts = ListField()

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
        possible = [i for i in ids if 0 < i <= MAX_ID]
        known = Host.objects.filter(pk__in=possible).values_list("pk", flat=True)
        missing = sorted(set(ids) - set(known))
        if missing:
            raise forms.ValidationError(f"No host with id {', '.join(map(str, missing))}.")
        return sorted(set(ids))
