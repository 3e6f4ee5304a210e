"""`manage.py demo` seeds a lab whose pages have something to show, the usage page included."""

import pytest
from django.core.management import CommandError, call_command

from accounting.models import DailyUsage
from monitoring.models import Device


@pytest.mark.django_db
def test_the_demo_lab_has_gpus_history_and_usage(client):
    call_command("demo", "--hosts", "2", "--gpus", "2", "--history-hours", "2", stdout=None)
    assert Device.objects.count() >= 4
    assert DailyUsage.objects.exists()  # rolled up at once, not a quarter hour later
    assert client.login(username="ada", password="demo-password")
    page = client.get("/usage/?by=host").content.decode()
    assert "No use recorded" not in page
    # Its people have UNIX accounts, so the job form shows where each may start now.
    assert "✓ you can start here now" in client.get("/jobs/new/").content.decode()


@pytest.mark.django_db
def test_bad_sizes_are_refused(capsys):
    with pytest.raises(CommandError, match="--hosts 1-1000"):
        call_command("demo", "--hosts", "0")
    assert not Device.objects.exists()
