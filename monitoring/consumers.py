"""The live dashboard's websocket: signed-in users get a snapshot, then after every cycle what
changed since (monitoring.live.changes)."""

import asyncio
import json
import time
from importlib import import_module
from urllib.parse import parse_qs

from channels.auth import get_user
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings

from .live import VIEWS, changes, freshness_marker, live_payload
from .loop import LIVE_GROUP
from .visibility import process_visibility

# Close code for "not signed in" (4000-4999 are free for applications).
NOT_SIGNED_IN = 4401
# Close code for a subscription it cannot read (?view= unknown, ?host= not an id).
BAD_SUBSCRIPTION = 4400
# How often a socket reads its session again, to close when its user signed out.
SESSION_RECHECK_SECONDS = 15.0


async def still_signed_in(scope) -> bool:
    """Whether the session this socket opened with still signs its user in.

    The scope's session was loaded once, at the handshake; a sign-out elsewhere (another tab,
    the admin ending it, a password change) shows only in the store, so read it afresh.
    """
    session = scope.get("session")
    if session is None or not session.session_key:
        return False
    fresh = import_module(settings.SESSION_ENGINE).SessionStore(session.session_key)
    user = await get_user({"session": fresh})
    return user.is_authenticated and user.pk == scope["user"].pk


def subscription(scope) -> tuple[str, int | None]:
    """(view, host id) from the socket's query string: ?view=board, ?view=host&host=<id>, or
    nothing for every host in full. Raises ValueError for anything else."""
    query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
    view = query.get("view", ["full"])[-1]
    if view not in VIEWS:
        raise ValueError(f"unknown view {view!r}")
    if view != "host":
        return view, None
    host = query.get("host", [""])[-1]
    if not host.isdigit():
        raise ValueError("view=host needs host=<host id>")
    return view, int(host)


class LiveConsumer(AsyncJsonWebsocketConsumer):
    """Sends the current snapshot at once, then again whenever a new one is stored.

    Anonymous visitors are refused before the handshake completes: they receive nothing.
    Each page subscribes to what it shows (``subscription``): the board to its compact rows,
    a host page to its host.
    """

    @classmethod
    async def encode_json(cls, content):
        # No spaces after separators: a tenth off every message.
        return json.dumps(content, separators=(",", ":"))

    async def connect(self):
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=NOT_SIGNED_IN)
            return
        try:
            self.view, self.host_id = subscription(self.scope)
        except ValueError:
            await self.close(code=BAD_SUBSCRIPTION)
            return
        self.marker = None
        self.sent = None  # host id -> the entry this socket last got (None: nothing yet)
        self.sending = asyncio.Lock()
        self.visibility = await database_sync_to_async(process_visibility)(user)
        await self.accept()
        if self.channel_layer is not None:
            await self.channel_layer.group_add(LIVE_GROUP, self.channel_name)
        await self.send_if_fresh()
        self.poller = asyncio.create_task(self.poll())

    async def disconnect(self, code):
        poller = getattr(self, "poller", None)
        if poller is not None:
            poller.cancel()
        if self.channel_layer is not None and hasattr(self, "marker"):
            await self.channel_layer.group_discard(LIVE_GROUP, self.channel_name)

    async def receive_json(self, content, **kwargs):
        """Dashboards only listen; anything they send is ignored."""

    async def poll(self):
        interval = float(settings.MONITORING_INTERVAL)
        checked = time.monotonic()
        while True:
            await asyncio.sleep(interval)
            # A session read per socket and poll would be a query every 2 s per open tab:
            # the sign-out is noticed within SESSION_RECHECK_SECONDS instead.
            if time.monotonic() - checked >= SESSION_RECHECK_SECONDS:
                if not await still_signed_in(self.scope):
                    await self.close(code=NOT_SIGNED_IN)
                    return
                checked = time.monotonic()
            await self.send_if_fresh()

    async def cycle_finished(self, event):
        """The loop's group message (with Redis): check now rather than at the next poll."""
        await self.send_if_fresh()

    async def send_if_fresh(self):
        async with self.sending:
            marker = await database_sync_to_async(freshness_marker)()
            if marker == self.marker:
                return
            self.marker = marker
            payload = await database_sync_to_async(live_payload)(
                self.visibility, self.view, self.host_id
            )
            first = self.sent is None  # the snapshot goes out even when there are no hosts
            message = payload if first else changes(payload, self.sent)
            self.sent = {host["id"]: host for host in payload["hosts"]}
            if first or message["hosts"] or message["removed"]:
                await self.send_json(message)
