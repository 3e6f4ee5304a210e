"""Django form widgets in the site's design: Bootstrap's classes on every input, select and
check box, added in one place instead of in each form (the admin ignores them: it loads no
Bootstrap)."""

from django.forms.renderers import DjangoTemplates

WIDGETS = "django/forms/widgets/"
# One option of a group (a radio button drawn on its own, as the job form's steps do) too.
CHECKS = ("checkbox.html", "radio.html", "checkbox_option.html", "radio_option.html")
SELECTS = ("select.html", "select_date.html")


def bootstrap_class(template_name: str) -> str:
    name = template_name.removeprefix(WIDGETS)
    if name in CHECKS:
        return "form-check-input"
    if name in SELECTS:
        return "form-select"
    if name in ("checkbox_select.html", "radio.html", "multiwidget.html", "hidden.html"):
        return ""
    return "form-control"


class BootstrapRenderer(DjangoTemplates):
    def render(self, template_name, context, request=None):
        widget = context.get("widget") if isinstance(context, dict) else None
        if widget is not None and template_name.startswith(WIDGETS):
            extra = bootstrap_class(template_name)
            attrs = widget.setdefault("attrs", {})
            if extra and extra not in attrs.get("class", ""):
                attrs["class"] = f"{extra} {attrs.get('class', '')}".strip()
        return super().render(template_name, context, request)
