"""Which GPU processes' command lines a viewer sees (command lines carry secrets).

Monitoring does not know whose UNIX account is whose; access control does, so the rule is
a class named by ``settings.PROCESS_VISIBILITY`` (``accesscontrol.accounts.ProcessVisibility``)
with ``shown(host, process) -> process``. The API, the dashboard page and its websocket all
ask it.
"""

from django.conf import settings
from django.utils.module_loading import import_string


def process_visibility(viewer):
    """The rule, for one viewer (build it once per request or connection)."""
    return import_string(settings.PROCESS_VISIBILITY)(viewer)


def visible_processes(visibility, host, processes) -> list[dict]:
    return [visibility.shown(host, process) for process in processes or []]
