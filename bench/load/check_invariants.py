"""After a load run: no GPU double-booked, no accepted booking lost, every cancel applied.

Reads the journal locust wrote (what the service confirmed to its users) and compares it
with the database. Exits 1 when an invariant is broken.
"""

import json
import os
import sys
from collections import defaultdict
from datetime import datetime
from pathlib import Path

import django

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hiveproject.settings")
django.setup()

from reservations.models import Reservation, ReservedDevice  # noqa: E402


def overlapping_slots() -> list[tuple]:
    """Pairs of holding slots on one device whose time ranges overlap."""
    by_device = defaultdict(list)
    for slot in ReservedDevice.objects.filter(holds=True).order_by("device_id", "start"):
        by_device[slot.device_id].append(slot)
    clashes = []
    for slots in by_device.values():
        for earlier, later in zip(slots, slots[1:], strict=False):
            if later.start < earlier.end:
                clashes.append((earlier.reservation_id, later.reservation_id, later.device_id))
    return clashes


def journal(path: Path) -> tuple[dict, set, set, int]:
    """Confirmed bookings, confirmed cancels, cancels sent without an answer, refusals."""
    booked, cancelled, cancelling, refused = {}, set(), set(), 0
    for line in path.read_text().splitlines():
        entry = json.loads(line)
        if "booked" in entry:
            booked[entry["booked"]] = entry
        elif "cancelling" in entry:
            cancelling.add(entry["cancelling"])
        elif "cancelled" in entry:
            cancelled.add(entry["cancelled"])
        else:
            refused += 1
    return booked, cancelled, cancelling - cancelled, refused


def lost_or_wrong(booked: dict, cancelled: set, unanswered: set) -> list[str]:
    problems = []
    stored = Reservation.objects.in_bulk(list(booked))
    for pk, entry in booked.items():
        reservation = stored.get(pk)
        if reservation is None:
            problems.append(f"booking {pk} confirmed to its user but missing")
            continue
        devices = sorted(reservation.slots.values_list("device_id", flat=True))
        if devices != sorted(entry["devices"]) or reservation.start != datetime.fromisoformat(
            entry["start"]
        ):
            problems.append(f"booking {pk} stored differently from what was confirmed")
        is_cancelled = reservation.status == Reservation.Status.CANCELLED
        if pk not in unanswered and is_cancelled != (pk in cancelled):
            problems.append(f"booking {pk}: cancelled={is_cancelled}, users were told otherwise")
    return problems


if __name__ == "__main__":
    booked, cancelled, unanswered, refused = journal(Path(sys.argv[1]))
    clashes, problems = overlapping_slots(), lost_or_wrong(booked, cancelled, unanswered)
    holding = ReservedDevice.objects.filter(holds=True).count()
    print(
        f"bookings confirmed: {len(booked)}, refused (GPU taken): {refused}, "
        f"cancelled: {len(cancelled)} (+{len(unanswered)} unanswered when the run stopped), "
        f"GPU slots held now: {holding}"
    )
    print(f"double bookings (overlapping held slots on one GPU): {len(clashes)}")
    print(f"confirmed bookings lost or changed: {len(problems)}")
    for line in problems[:20]:
        print("  ", line)
    sys.exit(1 if clashes or problems else 0)
