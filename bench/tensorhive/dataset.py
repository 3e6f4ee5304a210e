"""The data both services hold in bench/api_side_by_side.py, as plain Python (no Django, no
SQLAlchemy), so the TensorHive side (its own virtualenv) and ours fill the same rows.

Issue 18's comparison: 8 hosts × 8 GPUs, 20 users, 5,000 reservations of one GPU each (one
every 5 hours per GPU, 2 to 4 hours long, from ORIGIN on), the shape bench/api_reads.py uses.
Times are naive UTC (TensorHive stores them so); ours are made aware in UTC.
"""

import random
import uuid
from datetime import datetime, timedelta

HOSTS, GPUS_PER_HOST, USERS, RESERVATIONS = 8, 8, 20, 5000
HOUR = timedelta(hours=1)
PASSWORD = "bench-password-18"  # noqa: S105  (a throwaway benchmark account's)


def origin(now: datetime) -> datetime:
    """First booking's start: 8 days before now (UTC, on the hour), so this week is full."""
    return now.replace(minute=0, second=0, microsecond=0, tzinfo=None) - timedelta(days=8)


def usernames() -> list[str]:
    return [f"bench{i}" for i in range(USERS)]


def gpus() -> list[tuple[str, int, str]]:
    """(host name, index, UUID) of each GPU, in host then index order. A UUID is 40
    characters, as nvidia-smi writes them and as TensorHive requires."""
    rng = random.Random(64)
    return [
        (f"node-{h}", i, f"GPU-{uuid.UUID(int=rng.getrandbits(128))}")
        for h in range(HOSTS)
        for i in range(GPUS_PER_HOST)
    ]


def reservations(first: datetime) -> list[tuple[str, int, datetime, datetime, int]]:
    """(title, GPU position in gpus(), start, end, user position) of every booking."""
    rng = random.Random(18)
    count = HOSTS * GPUS_PER_HOST
    rows = []
    for k in range(RESERVATIONS // count + 1):
        for position in range(count):
            start = first + 5 * HOUR * k
            rows.append((start, rng.randint(2, 4) * HOUR, position, rng.randrange(USERS)))
    return [
        (f"run {n}", position, start, start + length, user)
        for n, (start, length, position, user) in enumerate(rows[:RESERVATIONS])
    ]
