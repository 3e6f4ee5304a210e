"""Signals other apps subscribe to; the receivers that send them live in ``receivers.py``."""

from django.db import transaction
from django.dispatch import Signal


class GrantsChanged(Signal):
    """Sent after commit whenever who may use what, and when, may have changed.

    That is: a grant was created, edited or deleted; its users, groups, hosts, devices or windows
    changed; a user joined or left a group that has grants; a group with grants was deleted; a
    ban was imposed, edited or lifted.

    Arguments:
        sender: the model class that changed (``Grant``, ``Window``, ``Ban``, ``Group``...).
        user_ids: non-empty ``frozenset[int]`` of the users whose coverage may have changed
            (both those who gained and those who lost); always computed, never "anyone".
        reason: a human sentence, e.g. "the grant 'students' changed", fit for a note to the user.

    Contract for receivers (reservations, the job queue): for each affected user, re-check every
    future reservation / queued launch with ``accesscontrol.coverage.check_access`` and cancel
    those no longer covered, telling the owner ``decision.reason`` and ``reason``. When access
    grows back, re-activate nothing on your own: a cancelled reservation stays cancelled until
    its owner books again. The signal is sent once per change, so one admin save may send
    several; every one of them is sent after the whole transaction committed, so re-checking is
    idempotent and each receiver sees the final state. Receivers should enqueue work (object ids
    only) rather than do it inline: they run in the request that made the change.
    """


grants_changed = GrantsChanged()


def announce(sender, user_ids, reason: str) -> None:
    """Send ``grants_changed`` once the current transaction commits (at once outside one)."""
    user_ids = frozenset(user_ids)
    if not user_ids:
        return
    transaction.on_commit(
        lambda: grants_changed.send(sender=sender, user_ids=user_ids, reason=reason)
    )
