"""hive status / reserve / reservations / cancel against a live server."""

import json
import os
import subprocess
import sys
from datetime import timedelta

import pytest
from django.utils import timezone

from apitokens.models import ApiToken
from reservations.models import Reservation
from reservations.services import create_reservation


def lines_of(output: str) -> dict[str, str]:
    """Table lines by their first cell (the GPU name or reservation id)."""
    return {line.split()[0]: line for line in output.splitlines()[1:] if line.strip()}


@pytest.fixture
def booked_by_other(bookable, other_user):
    now = timezone.now()
    end = now + timedelta(hours=3)
    return create_reservation(
        other_user, title="their run", devices=[bookable[1]], start=now, end=end
    )


# --- status -------------------------------------------------------------------------------


def test_status_shows_every_gpu_its_users_and_bookings(hive, signed_in, owner, booked_by_other):
    signed_in(owner)
    result = hive("status")
    assert result.exit_code == 0, result.output
    rows = lines_of(result.output)
    assert set(rows) == {"node-1:0", "node-1:1", "node-1:2", "node-2:0"}
    assert "busy" in rows["node-1:0"] and "97%" in rows["node-1:0"]
    assert "alice(8800M)" in rows["node-1:0"] and "9000/15360 MiB" in rows["node-1:0"]
    assert "reserved" in rows["node-1:1"] and "other until" in rows["node-1:1"]
    assert "free" in rows["node-1:2"]
    assert "unreachable" in rows["node-2:0"]
    assert "\x1b[" not in result.output  # not a terminal: no colours


def test_status_free_and_host_narrow_the_list(hive, signed_in, owner, booked_by_other):
    signed_in(owner)
    assert set(lines_of(hive("status", "--free").output)) == {"node-1:2"}
    assert set(lines_of(hive("status", "--host", "node-2").output)) == {"node-2:0"}
    result = hive("status", "--host", "node-9")
    assert result.exit_code == 1
    assert "No host named 'node-9'; hosts: node-1, node-2." in result.output


def test_status_json_is_for_scripts(hive, signed_in, owner, booked_by_other):
    signed_in(owner)
    gpus = {g["name"]: g for g in json.loads(hive("status", "--json").output)}
    assert gpus["node-1:0"]["users"] == ["alice"] and gpus["node-1:0"]["utilization_gpu"] == 97
    assert gpus["node-1:0"]["processes"][0]["pid"] == 4242
    assert gpus["node-1:1"]["reservation"]["owner"] == "other"
    assert [name for name, g in gpus.items() if g["free"]] == ["node-1:2"]


def test_a_gpu_booked_by_me_is_free_for_me(hive, signed_in, other_user, booked_by_other):
    signed_in(other_user)
    free = {g["name"] for g in json.loads(hive("status", "--free", "--json").output)}
    assert free == {"node-1:1", "node-1:2"}


def test_colours_on_a_terminal_and_never_with_no_color(
    hive, signed_in, owner, bookable, monkeypatch
):
    signed_in(owner)
    assert "\x1b[32mfree" in hive("status", color=True).output
    monkeypatch.setenv("NO_COLOR", "1")
    assert "\x1b[" not in hive("status", color=True).output


def test_an_expired_token_says_to_log_in_again(hive, signed_in, owner, bookable):
    signed_in(owner)
    ApiToken.objects.update(expires=timezone.now() - timedelta(minutes=1))
    result = hive("status")
    assert result.exit_code == 1
    assert "Not signed in: This token has expired" in result.output
    assert "run `hive login URL` again" in result.output


def test_the_installed_command_runs_plain_when_piped(live_server, owner, bookable, hive_config):
    from apitokens.services import issue_token

    env = {**os.environ, "HIVE_URL": live_server.url, "HIVE_TOKEN": issue_token(owner, "x")[1]}
    hive_command = os.path.join(os.path.dirname(sys.executable), "hive")
    done = subprocess.run(
        [hive_command, "status"], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "node-1:2" in done.stdout and "\x1b[" not in done.stdout


# --- reserve, reservations, cancel -----------------------------------------------------------


def test_reserve_books_gpus_from_friendly_times(hive, signed_in, owner, bookable):
    signed_in(owner)
    args = ("--gpus", "node-1:0,2", "--from", "tomorrow 9:00", "--to", "17:00", "-t", "sweep")
    result = hive("reserve", *args)
    assert result.exit_code == 0, result.output
    booking = Reservation.objects.get()
    assert f"Reserved #{booking.pk} 'sweep': node-1:0, node-1:2" in result.output
    assert sorted(d.index for d in booking.devices.all()) == [0, 2]
    start, end = (timezone.localtime(t) for t in (booking.start, booking.end))
    assert (start.hour, end.hour, (end - start).total_seconds()) == (9, 17, 8 * 3600)
    assert start.date() == (timezone.localdate() + timedelta(days=1))


def test_a_refused_booking_says_why(hive, signed_in, owner, booked_by_other):
    signed_in(owner)
    result = hive("reserve", "-g", "node-1:1", "--from", "now", "--to", "+1h", "-t", "mine")
    assert result.exit_code == 1
    assert "Refused: GPU node-1:1 is already reserved by other" in result.output
    assert Reservation.objects.count() == 1


def test_access_control_refusals_reach_the_user(hive, signed_in, owner, lab):
    signed_in(owner)  # no grant: the lab's access rules refuse
    args = ("-g", "node-1:2", "--from", "tomorrow 9:00", "--to", "10:00", "-t", "x")
    result = hive("reserve", *args)
    assert result.exit_code == 1 and "owner is not allowed on node-1:2" in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("-g", "node-7:0"), "No GPUs on a host named 'node-7'; hosts: node-1, node-2."),
        (("-g", "node-1:5"), "node-1 has no GPU 5 (it has 0, 1, 2)."),
        (("-g", "node-1:x"), "GPU indexes are numbers"),
        (("-g", "node-1:0", "--from", "someday 9:00"), "'someday' is not a day"),
        (("-g", "node-1:0", "--to", "25:00"), "'25:00' is not a time"),
        (("-g", "node-1:0", "--to", "8:00"), "Refused: The reservation must end after it starts."),
    ],
)
def test_bad_reservations_are_refused_clearly(hive, signed_in, owner, bookable, args, message):
    signed_in(owner)
    base = {"--from": "tomorrow 9:00", "--to": "17:00", "-t": "x"}
    given = dict(zip(args[::2], args[1::2], strict=True))
    result = hive("reserve", *[part for item in {**base, **given}.items() for part in item])
    assert result.exit_code == 1
    assert message in result.output
    assert not Reservation.objects.exists()


def test_reservations_lists_current_and_coming_ones(hive, signed_in, owner, booked_by_other):
    signed_in(owner)
    hive("reserve", "-g", "node-1:2", "--from", "tomorrow 9:00", "--to", "17:00", "-t", "mine")
    rows = lines_of(hive("reservations").output)
    assert len(rows) == 2 and "their run" in rows[str(booked_by_other.pk)]
    assert "node-1:1" in rows[str(booked_by_other.pk)]
    mine = lines_of(hive("reservations", "--mine").output)
    assert [r.split()[1] for r in mine.values()] == ["mine"]
    listed = json.loads(hive("reservations", "--mine", "--json").output)
    assert [r["title"] for r in listed] == ["mine"]


def test_cancel_own_and_not_someone_elses(hive, signed_in, owner, booked_by_other):
    signed_in(owner)
    hive("reserve", "-g", "node-1:2", "--from", "tomorrow 9:00", "--to", "17:00", "-t", "mine")
    mine = Reservation.objects.get(title="mine")
    result = hive("cancel", str(mine.pk))
    assert result.exit_code == 0 and f"Cancelled #{mine.pk} 'mine'." in result.output
    mine.refresh_from_db()
    assert mine.status == Reservation.Status.CANCELLED
    result = hive("cancel", str(booked_by_other.pk))
    assert result.exit_code == 1
    assert "Not allowed: Only the owner or an admin may change this reservation." in result.output
    result = hive("cancel", "999999")
    assert result.exit_code == 1 and "Not found" in result.output


def test_an_admin_ends_a_running_reservation(hive, signed_in, admin_user, booked_by_other):
    signed_in(admin_user)
    result = hive("cancel", str(booked_by_other.pk))
    assert result.exit_code == 0 and f"Ended #{booked_by_other.pk}" in result.output
    booked_by_other.refresh_from_db()
    assert booked_by_other.end <= timezone.now()


# --- MIG slices ----------------------------------------------------------------------------


@pytest.fixture
def split_node(bookable):
    """node-1's GPU 2 in MIG mode, split into 3g.20gb and 1g.5gb (A100 40GB profiles)."""
    from monitoring.models import Device

    gpu = bookable[2]
    gpu.mig_enabled = True
    gpu.save()
    for n, profile in enumerate(["3g.20gb", "1g.5gb"]):
        Device.objects.create(
            host=gpu.host, index=2, uuid=f"MIG-{n}", parent=gpu, mig_profile=profile, mig_index=n
        )
    return gpu


def test_status_lists_each_slice_under_its_gpu(hive, signed_in, owner, split_node):
    signed_in(owner)
    names = [line.split()[0] for line in hive("status").output.splitlines()[1:] if line.strip()]
    assert names == ["node-1:0", "node-1:1", "node-1:2", "node-1:2.0", "node-1:2.1", "node-2:0"]
    gpus = {g["name"]: g for g in json.loads(hive("status", "--json").output)}
    assert gpus["node-1:2.1"]["mig_profile"] == "1g.5gb" and gpus["node-1:2"]["mig_profile"] == ""


def test_reserve_names_a_slice_or_its_whole_gpu(hive, signed_in, owner, other_user, split_node):
    signed_in(owner)
    times = ("--from", "tomorrow 9:00", "--to", "17:00")
    result = hive("reserve", "-g", "node-1:2.1", *times, "-t", "slice")
    assert result.exit_code == 0, result.output
    assert "Reserved #" in result.output and ": node-1:2.1, " in result.output
    [piece] = Reservation.objects.get(title="slice").devices.all()
    assert piece.uuid == "MIG-1"
    # node-1:2 is the whole GPU (not one of its slices), booked over the slice: refused.
    signed_in(other_user)
    result = hive("reserve", "-g", "node-1:2", *times, "-t", "board")
    assert result.exit_code == 1
    assert "GPU node-1:2.1 (1g.5gb) is already reserved by owner" in result.output
    result = hive("reserve", "-g", "node-1:2.7", *times, "-t", "x")
    assert (
        result.exit_code == 1
        and "node-1 has no GPU 2.7 (it has 0, 1, 2, 2.0, 2.1)" in result.output
    )
