"""Which GPU processes' command lines a viewer sees (command lines carry secrets).

Monitoring does not know whose UNIX account is whose; access control does, so the rule is
a class named by ``settings.PROCESS_VISIBILITY`` (``accesscontrol.accounts.ProcessVisibility``)
with ``shown(host, process) -> process``. The API, the dashboard page and its websocket all
ask it.
"""

from django.conf import settings
from django.utils.module_loading import import_string

from .containers import owner_text


def process_visibility(viewer):
    """The rule, for one viewer (build it once per request or connection)."""
    return import_string(settings.PROCESS_VISIBILITY)(viewer)


def visible_processes(visibility, host, processes) -> list[dict]:
    """Each process as the viewer may see it, with ``owner_text``: whose it is, in words
    ("alice (container train-3)"), as every page and the API say it."""
    return [
        {**visibility.shown(host, process), "owner_text": owner_text(process)}
        for process in processes or []
    ]
