"""What the rows of an upgraded database mean to this code, as JSON on stdout: run inside
the upgraded database by tests/upgrade/test_from_1984f12.py

    manage.py shell -c "from tests.upgrade.meaning import main; main()"
"""

import json
from datetime import datetime, timedelta
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError

FACTS = json.loads((Path(__file__).parent.parent / "fixtures/upgrade/facts.json").read_text())


def main() -> None:
    from accesscontrol.models import UpgradeNote

    users = {user.username: user for user in get_user_model().objects.all()}
    during = datetime.fromisoformat(FACTS["booking"][0]) + timedelta(hours=1)
    answer = {
        "run_as": {f"{name}@{host}": run_as(users[name], host) for name, host in RUN_AS},
        "start": can_start(FACTS["alice_task"], during),
        "intruders": intruders(during),
        "token_user": token_user(FACTS["alice_token_secret"]),
        "reservations": reservations(),
        "notes": sorted(
            [note.kind, note.user.username if note.user else None]
            for note in UpgradeNote.objects.open().select_related("user")
        ),
    }
    print(json.dumps(answer))


RUN_AS = [name.split("@") for name in FACTS["old_unix_names"]]  # each user on each host


def run_as(user, host_name: str) -> list:
    from accesscontrol.accounts import check_run_as
    from monitoring.models import Host

    try:
        found = check_run_as(user, Host.objects.get(name=host_name))
    except ValidationError as exc:
        return ["refused", " ".join(exc.messages)]
    return [found.name, found.min_uid]


def can_start(task_id: int, at: datetime) -> str:
    from jobs.models import Task
    from jobs.services import check_can_start

    try:
        found = check_can_start(Task.objects.get(pk=task_id), at)
    except ValidationError as exc:
        return "refused: " + " ".join(exc.messages)
    return f"starts as {found.name}"


def intruders(at: datetime) -> list:
    """alice's own process and a stranger's on the GPU of her booking, as a probe shows them."""
    from monitoring.models import Host
    from protection import config
    from protection.detection import find_intrusions

    host = Host.objects.get(name="gpu1")
    host.last_snapshot = {
        "processes": [
            {"gpu_uuid": "GPU-old-0", "pid": 101, "user": "alice", "command": "python train.py"},
            {"gpu_uuid": "GPU-old-0", "pid": 202, "user": "mallory", "command": "python x.py"},
        ]
    }
    return sorted([i.pid, i.offender_unix] for i in find_intrusions(host, config.RESERVED, at))


def token_user(secret: str) -> str | None:
    from apitokens.services import token_for_secret

    return token_for_secret(secret).user.username


def reservations() -> list:
    from reservations.models import Reservation

    rows = Reservation.objects.order_by("pk")
    return [
        [
            r.owner.username,
            r.status,
            r.start.isoformat(),
            r.end.isoformat(),
            sorted(r.devices.values_list("uuid", flat=True)),
        ]
        for r in rows
    ]
