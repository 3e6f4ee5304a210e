"""Fill a fresh TensorHive 1.1.0 database with bench/tensorhive/dataset.py's rows.

Runs in TensorHive's own virtualenv, with HOME pointing at the benchmark's config (setup.sh
writes it): python populate.py ORIGIN, ORIGIN the first booking's start (naive UTC, ISO).
Users, roles, the default group and its "can always use everything" permission are made
with TensorHive's models as its `tensorhive init` makes them; GPUs are its Resource rows;
the 5,000 bookings are added in one transaction (they do not overlap by construction, so
skipping Reservation.check_assertions changes no row, only the minutes it takes).
"""

import sys
from datetime import datetime

import dataset
from tensorhive.database import db_session, ensure_db_with_current_schema

ensure_db_with_current_schema()

from tensorhive.models.Group import Group  # noqa: E402
from tensorhive.models.Reservation import Reservation  # noqa: E402
from tensorhive.models.Resource import Resource  # noqa: E402
from tensorhive.models.Restriction import Restriction  # noqa: E402
from tensorhive.models.Role import Role  # noqa: E402
from tensorhive.models.User import User  # noqa: E402


def main(first: datetime) -> None:
    if User.query.count():
        sys.exit("TensorHive's database already has users: start from an empty HOME")
    group = Group(name="users")
    group.is_default = True
    group.save()
    everything = Restriction(name="can always use everything", starts_at=first, is_global=True)
    everything.apply_to_group(group)
    users = []
    for name in dataset.usernames():
        user = User(username=name, email=f"{name}@lab.example", password=dataset.PASSWORD)
        user.roles.append(Role(name="user"))
        user.save()
        group.add_user(user)
        users.append(user)
    gpus = dataset.gpus()
    db_session.add_all(
        Resource(id=gpu_uuid, name=f"{host}:{index}", hostname=host)
        for host, index, gpu_uuid in gpus
    )
    db_session.add_all(
        Reservation(
            title=title,
            description="",
            resource_id=gpus[position][2],
            user_id=users[user].id,
            start=start,
            end=end,
        )
        for title, position, start, end, user in dataset.reservations(first)
    )
    db_session.commit()
    print(f"TensorHive: {Reservation.query.count()} reservations on {len(gpus)} GPUs")


if __name__ == "__main__":
    main(datetime.fromisoformat(sys.argv[1]))
