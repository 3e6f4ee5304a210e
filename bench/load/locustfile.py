"""200 lab members: the GPU dashboard, their access week, the calendar, the API, and booking
and cancelling GPUs through /api/reservations/. Requests arrive as nginx forwards them
(X-Forwarded-Proto: https), so the production profile's HTTPS checks all apply.

Every booking the service accepted (201) and every cancellation it confirmed (204) is
written to LOAD_JOURNAL, for check_invariants.py to compare with the database afterwards.
"""

import json
import os
import random
from datetime import UTC, datetime, timedelta
from itertools import cycle

from locust import HttpUser, between, task

STATE = json.loads(open(os.environ["LOAD_SESSIONS"]).read())
ACCOUNTS = cycle(STATE["users"])
DEVICES = STATE["devices"]
HOST = os.environ.get("LOAD_PUBLIC_HOST", "localhost")
JOURNAL = open(os.environ["LOAD_JOURNAL"], "a", buffering=1)  # noqa: SIM115


def slot() -> tuple[str, str]:
    """One hour in the next two days on a half-hour boundary: users collide on purpose."""
    base = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    start = base + timedelta(minutes=30 * random.randrange(96))
    return start.isoformat(), (start + timedelta(hours=1)).isoformat()


class LabMember(HttpUser):
    wait_time = between(1, 4)

    def on_start(self):
        account = next(ACCOUNTS)
        self.client.cookies.set("sessionid", account["session"])
        self.client.cookies.set("csrftoken", account["csrf"])
        self.client.headers.update(
            {
                "X-Forwarded-Proto": "https",
                "Host": HOST,
                "Origin": f"https://{HOST}",
                "Referer": f"https://{HOST}/",
                "X-CSRFToken": account["csrf"],
            }
        )
        self.mine = []

    @task(4)
    def dashboard(self):
        self.client.get("/", name="/ (GPU dashboard)")

    @task(2)
    def access_week(self):
        self.client.get("/access/week/", name="/access/week/")

    @task(2)
    def calendar(self):
        """The week the calendar's script asks of the API: its shading, then its bookings."""
        day = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
        week = {
            "start": day.isoformat(),
            "end": (day + timedelta(days=7)).isoformat(),
            "device": ",".join(map(str, DEVICES[:8])),
        }
        self.client.get("/api/access/", params=week, name="/api/access/ (calendar week)")
        self.client.get(
            "/api/reservations/",
            params={**week, "page_size": 1000},
            name="/api/reservations/ (calendar week)",
        )

    @task(2)
    def api_devices(self):
        self.client.get("/api/devices/", name="/api/devices/")

    @task(2)
    def api_reservations(self):
        start, _ = slot()
        end = (datetime.now(UTC) + timedelta(days=2)).isoformat()
        self.client.get(
            "/api/reservations/", params={"start": start, "end": end}, name="/api/reservations/"
        )

    @task(2)
    def book(self):
        start, end = slot()
        devices = random.sample(DEVICES, random.choice((1, 1, 2)))
        body = {"title": "load", "devices": devices, "start": start, "end": end}
        with self.client.post(
            "/api/reservations/", json=body, name="POST /api/reservations/", catch_response=True
        ) as response:
            if response.status_code == 201:
                booked = response.json()
                JOURNAL.write(json.dumps({"booked": booked["id"], **body}) + "\n")
                self.mine.append(booked["id"])
            elif response.status_code == 400 and "already reserved" in response.text:
                response.success()  # someone else holds the GPU then: the expected refusal
                JOURNAL.write(json.dumps({"refused": body}) + "\n")
            else:
                response.failure(f"{response.status_code}: {response.text[:200]}")

    @task(1)
    def cancel(self):
        if not self.mine:
            return
        pk = self.mine.pop(random.randrange(len(self.mine)))
        # Noted before sending: a cancel still in flight when the run stops has no answer,
        # and then either outcome is right.
        JOURNAL.write(json.dumps({"cancelling": pk}) + "\n")
        with self.client.delete(
            f"/api/reservations/{pk}/", name="DELETE /api/reservations/<id>/", catch_response=True
        ) as response:
            if response.status_code == 204:
                JOURNAL.write(json.dumps({"cancelled": pk}) + "\n")
            else:
                response.failure(f"{response.status_code}: {response.text[:200]}")
