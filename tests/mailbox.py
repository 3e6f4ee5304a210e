"""A real SMTP server on loopback (aiosmtpd) as the service's mail server: the ``smtp``
fixture (tests/conftest.py) is its inbox. ``down`` stops it, so sending fails as with a
mail server that is away, and ``up`` starts it again on the same port."""

from email import message_from_bytes, policy

import pytest
from aiosmtpd.controller import Controller

from tests.realparts import free_port


class Inbox:
    def __init__(self):
        self.messages = []
        self.port = free_port()
        self.controller = None

    async def handle_DATA(self, server, session, envelope):  # noqa: N802 (aiosmtpd's name)
        self.messages.append(envelope)
        return "250 OK"

    def up(self):
        self.controller = Controller(self, hostname="127.0.0.1", port=self.port)
        self.controller.start()

    def down(self):
        if self.controller is not None:
            self.controller.stop()
            self.controller = None

    def to(self) -> list[list[str]]:
        """Each message's recipients, in the order received."""
        return [envelope.rcpt_tos for envelope in self.messages]

    def text(self, index: int = 0) -> str:
        """One message as it came over the wire, headers and all."""
        return self.messages[index].content.decode()

    def mails(self) -> list[tuple[list[str], str, str]]:
        """Each message's recipients, subject and body (decoded), in the order received."""
        parsed = [message_from_bytes(e.content, policy=policy.default) for e in self.messages]
        return [
            (e.rcpt_tos, m["Subject"], m.get_content())
            for e, m in zip(self.messages, parsed, strict=True)
        ]


@pytest.fixture
def smtp(settings):
    """Mail goes over real SMTP, without login or TLS, to a local aiosmtpd."""
    inbox = Inbox()
    inbox.up()
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", inbox.port
    settings.EMAIL_HOST_USER = settings.EMAIL_HOST_PASSWORD = ""
    settings.EMAIL_USE_TLS = settings.EMAIL_USE_SSL = False
    yield inbox
    inbox.down()
