"""An example of a team's own handler: post each violation to a chat webhook.

Plug it in with one entry in VIOLATION_HANDLERS (environment: JSON)::

    VIOLATION_HANDLERS='[
      {"handler": "protection.handlers.terminal.write_to_terminals"},
      {"handler": "protection.handlers.email.EmailHandler"},
      {"handler": "protection.handlers.examples.post_to_chat",
       "options": {"url": "https://chat.example.org/hooks/abc"}}
    ]'

A handler is any importable function ``handle(violation, **options)``: it receives the
Violation (``device.host``, ``offender_unix``, ``offender``, ``reservation``, ``pid``,
``command``, ``first_seen``...) and the entry's options, and returns a short text that is
recorded as the run's outcome. It runs in a background worker, so it may be slow; if it
raises, the error is recorded on the violation and nothing else is disturbed. Raise
``protection.handlers.Skip("why")`` to record that it chose to do nothing.
"""

import json
import urllib.request

from . import Skip, texts


def post_to_chat(violation, url: str = "", timeout: float = 10) -> str:
    """POST ``{"text": ...}`` (the form Slack, Mattermost and Rocket.Chat accept) to ``url``."""
    if not url.startswith(("https://", "http://")):
        raise Skip("no webhook url configured")
    body = json.dumps({"text": texts.to_owner(violation)}).encode()
    request = urllib.request.Request(  # noqa: S310 (http(s) only, checked above)
        url, data=body, headers={"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310
        return f"posted to chat ({response.status})"
