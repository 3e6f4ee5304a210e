"""Webhooks go only where the lab allows: internal targets refused when a channel is saved
(page, API) and again when a delivery connects; what the owner reads gives no port state."""

import ipaddress

import pytest

from notifications import send, targets, webhooks
from notifications.models import Channel, Delivery
from tests.realparts import free_port

PAGE, API = "/notifications/", "/api/notification-channels/"
INTERNAL = [
    "http://127.0.0.1:6379/",
    "http://2130706433:5432/",  # 127.0.0.1 as one number
    "http://0x7f.1/",
    "http://127.1/",
    "http://[::1]:8000/",
    "http://[::ffff:127.0.0.1]/",
    "http://localhost:6379/",
    "http://LOCALHOST./",
    "http://169.254.169.254/latest/meta-data/",
    "http://0.0.0.0:8000/",
    "http://[::]/",
    "http://10.1.2.3/hooks/x",
    "http://192.168.1.1/",
    "http://172.16.0.1/",
    "http://[fd00::1]/",
    "http://224.0.0.1/",
    "http://100.64.0.1/",  # shared address space (carrier-grade NAT)
]


def save_everywhere(client, target):
    """The API's and the page's answers to the same new channel."""
    body = {"kind": "json", "target": target}
    return client.post(API, body, content_type="application/json"), client.post(PAGE, body)


@pytest.mark.parametrize("target", INTERNAL)
def test_internal_targets_are_refused_when_saved(client, owner, target):
    client.force_login(owner)
    api, page = save_everywhere(client, target)
    assert api.status_code == 400 and "inside the lab" in api.json()["target"][0]
    assert page.status_code == 400 and "inside the lab" in page.content.decode()
    assert not Channel.objects.exists()


@pytest.mark.parametrize(
    "target, words",
    [
        ("http://user:secret@localhost:6379/", "user name or password"),
        ("https://token@hooks.example.org/x", "user name or password"),
        ("gopher://hooks.example.org/", "http:// or https://"),
        ("http://hooks.example.org:99999/", "port"),
    ],
)
def test_credentials_other_schemes_and_bad_ports_are_refused(client, owner, target, words):
    client.force_login(owner)
    api, page = save_everywhere(client, target)
    assert api.status_code == 400 and words in api.json()["target"][0]
    assert page.status_code == 400
    assert not Channel.objects.exists()


def test_an_edit_is_checked_too(client, owner):
    hook = Channel.objects.create(user=owner, kind="slack", target="https://hooks.example.org/a")
    client.force_login(owner)
    answer = client.patch(f"{API}{hook.pk}/", {"target": "http://[::1]/"},
                          content_type="application/json")  # fmt: skip
    assert answer.status_code == 400
    prefix = f"c{hook.pk}"
    client.post(f"{PAGE}{hook.pk}/edit/", {f"{prefix}-kind": "slack",
                f"{prefix}-target": "http://127.0.0.1/"})  # fmt: skip
    hook.refresh_from_db()
    assert hook.target == "https://hooks.example.org/a"


def test_the_admin_allows_an_internal_network_or_host(client, owner, settings):
    client.force_login(owner)
    settings.NOTIFY_ALLOWED_TARGETS = ["10.20.0.0/16", "chat.lab.internal"]
    api, _ = save_everywhere(client, "http://10.20.3.4:8065/hooks/abc")
    assert api.status_code == 201
    api, _ = save_everywhere(client, "http://10.21.0.1/hooks/abc")  # not in the network
    assert api.status_code == 400
    assert targets.listed("chat.lab.internal", ipaddress.ip_address("10.9.9.9"))
    assert not targets.listed("other.lab.internal", ipaddress.ip_address("10.9.9.9"))


def test_a_network_does_not_open_the_service_own_address(settings):
    own = sorted(targets.own_addresses(), key=str)[0]
    wide = ipaddress.ip_network(f"{own}/8" if own.version == 4 else f"{own}/64", strict=False)
    settings.NOTIFY_ALLOWED_TARGETS = [str(wide)]
    assert not targets.allowed("x", own)
    settings.NOTIFY_ALLOWED_TARGETS = [str(own)]  # listed as itself: the admin's choice
    assert targets.allowed("x", own)


def test_a_public_target_passes_unresolved_names_wait_for_the_send(client, owner):
    client.force_login(owner)
    api, _ = save_everywhere(client, "https://203.0.113.1.nip.invalid/hook")
    assert api.status_code == 201  # not found now: checked again at every delivery
    assert targets.check_url("http://8.8.8.8/x").address == ipaddress.ip_address("8.8.8.8")


def deliver_to(owner, target) -> Delivery:
    """A channel whose target passed when it was saved (it is in the table), one event."""
    Channel.objects.create(user=owner, kind="json", target=target)
    send.notify(owner, "job_ended", "job-1-ended", "Your job ended", "exit code 0")
    send.send_due()
    return Delivery.objects.get()


def test_a_name_resolving_inside_the_lab_when_sent_is_refused(owner, receiver, settings):
    settings.NOTIFY_ALLOWED_TARGETS = []  # the receiver's loopback is not allowed here
    port = receiver.server_address[1]
    delivery = deliver_to(owner, f"http://localhost:{port}/hook")
    assert receiver.received == []  # never connected
    assert delivery.state == Delivery.State.PENDING and delivery.attempts == 1
    assert delivery.last_error == f"Not sent: {targets.REFUSED}"
    assert Channel.objects.get().last_error == delivery.last_error


def test_it_connects_to_the_checked_address_naming_the_host(receiver):
    port = receiver.server_address[1]
    checked = targets.Target(f"http://hooks.lab.test:{port}/in", "hooks.lab.test",
                             ipaddress.ip_address("127.0.0.1"))  # fmt: skip
    assert webhooks.send(checked, {"text": "hi"}) == 200
    assert receiver.hosts == [f"hooks.lab.test:{port}"]
    assert receiver.received == [("/in", {"text": "hi"})]


def test_closed_and_silent_ports_read_the_same(owner, other_user, silent, settings):
    settings.NOTIFY_SEND_TIMEOUT = 0.5
    closed = deliver_to(owner, f"http://127.0.0.1:{free_port()}/")
    Channel.objects.create(user=other_user, kind="json", target=silent.url)
    send.notify(other_user, "job_ended", "job-2-ended", "Your job ended", "exit code 0")
    send.send_due()
    hanging = Delivery.objects.get(channel__user=other_user)
    assert closed.last_error == hanging.last_error == webhooks.UNDELIVERED
    for words in ("refused", "timed out", "timeout", "Connect"):
        assert words not in closed.last_error


def test_a_public_webhook_names_the_status_it_answered():
    public = targets.Target("https://hooks.example.org/x", "hooks.example.org",
                            ipaddress.ip_address("93.184.216.34"))  # fmt: skip
    assert webhooks.told(public, "The webhook answered HTTP 404.") == (
        "The webhook answered HTTP 404."
    )
    internal = targets.Target("http://10.0.0.5/x", "10.0.0.5", ipaddress.ip_address("10.0.0.5"))
    assert webhooks.told(internal, "The webhook answered HTTP 404.") == webhooks.UNDELIVERED


def test_one_user_has_at_most_the_cap_of_channels(client, owner, other_user, settings):
    settings.NOTIFY_MAX_CHANNELS = 2
    for n in range(2):
        Channel.objects.create(user=owner, kind="slack", target=f"https://hooks.example.org/{n}")
    client.force_login(owner)
    api, page = save_everywhere(client, "https://hooks.example.org/3")
    assert api.status_code == 400 and "NOTIFY_MAX_CHANNELS" in str(api.json())
    assert page.status_code == 400 and "NOTIFY_MAX_CHANNELS" in page.content.decode()
    assert Channel.objects.filter(user=owner).count() == 2
    client.force_login(other_user)  # the cap is per user
    assert save_everywhere(client, "https://hooks.example.org/4")[0].status_code == 201
