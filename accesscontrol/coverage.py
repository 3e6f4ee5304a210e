"""The one question every app asks: may user U use device D over [start, end)?

Coverage is computed in the site's wall-clock time: an instant is covered by a grant when its
local date lies within the grant's dates and its local weekday and time of day lie within one
of the grant's weekly windows (or the grant has none). So "Mondays 8-16" means 8-16 on the
wall clock in summer and in winter. Exactly, without scanning minutes: the range is cut into
pieces of constant UTC offset, and within a piece local time is UTC shifted by a constant, so
local intervals map back to UTC intervals one to one.
"""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from django.contrib.auth.models import Group
from django.db.models import Prefetch, Q, prefetch_related_objects
from django.utils import timezone

from core.templatetags.hive_time import absolute
from core.zones import site_zone
from monitoring.models import Device, Host

from . import changes
from .intervals import clip, gaps, merge
from .models import Ban, Grant

ONE_DAY = timedelta(days=1)
ONE_MINUTE = timedelta(minutes=1)  # what starting work asks of the grants: the next minute
END_OF_TIME = datetime.max.replace(tzinfo=UTC)


@dataclass(frozen=True)
class WeeklyWindow:
    weekdays: frozenset[int]
    start: time
    end: time


@dataclass(frozen=True)
class Rule:
    """A grant reduced to what matters for time: its dates and windows (none: all day)."""

    valid_from: date
    valid_until: date | None
    windows: tuple[WeeklyWindow, ...] = ()

    @classmethod
    def of(cls, grant: Grant) -> "Rule":
        windows = tuple(WeeklyWindow(w.weekday_set, w.start, w.end) for w in grant.windows.all())
        return cls(grant.valid_from, grant.valid_until, windows)


@dataclass(frozen=True)
class AccessDecision:
    """The answer of ``check_access``; ``uncovered`` is empty exactly when ``allowed``."""

    allowed: bool
    uncovered: list[tuple[datetime, datetime]] = field(default_factory=list)
    reason: str = ""

    def __bool__(self):
        return self.allowed


# --- wall-clock coverage of one rule ---------------------------------------------------------


def _validity(rule: Rule) -> tuple[datetime, datetime]:
    first = datetime.combine(rule.valid_from, time())
    if rule.valid_until is None or rule.valid_until == date.max:
        return first, datetime.max
    return first, datetime.combine(rule.valid_until + ONE_DAY, time())


def _window_occurrences(window: WeeklyWindow, wall_start: datetime, wall_end: datetime):
    """Local intervals of ``window``, starting from the day before wall_start (overnight)."""
    day = wall_start.date() - ONE_DAY
    while day <= wall_end.date():
        if day.weekday() in window.weekdays:
            closes_on = day if window.end > window.start else day + ONE_DAY
            yield datetime.combine(day, window.start), datetime.combine(closes_on, window.end)
        day += ONE_DAY


def wall_coverage(rule: Rule, wall_start: datetime, wall_end: datetime) -> list[tuple]:
    """Naive local intervals within [wall_start, wall_end) that ``rule`` covers."""
    first, last = _validity(rule)
    start, end = max(wall_start, first), min(wall_end, last)
    if start >= end:
        return []
    if not rule.windows:
        return [(start, end)]
    occurrences = (o for w in rule.windows for o in _window_occurrences(w, start, end))
    return clip(merge(occurrences), start, end)


# --- from wall-clock time to UTC --------------------------------------------------------------


def _offset(instant: datetime, zone: ZoneInfo) -> timedelta:
    return instant.astimezone(zone).utcoffset()


def _next_offset_change(cursor: datetime, end: datetime, zone: ZoneInfo) -> datetime:
    """First instant after ``cursor`` with another UTC offset, or ``end``.

    Steps an hour at a time (zones change offset months apart), then bisects to the
    microsecond, so the boundary is exact.
    """
    offset, step = _offset(cursor, zone), timedelta(hours=1)
    low = cursor
    while low < end:
        high = min(low + step, end)
        if _offset(high, zone) != offset:
            while high - low > timedelta(microseconds=1):
                middle = low + (high - low) / 2
                low, high = (middle, high) if _offset(middle, zone) == offset else (low, middle)
            return high
        low = high
    return end


def offset_pieces(start: datetime, end: datetime, zone: ZoneInfo):
    """[start, end) cut into (piece_start, piece_end, utc_offset) of constant offset."""
    cursor = start
    while cursor < end:
        change = _next_offset_change(cursor, end, zone)
        yield cursor, change, _offset(cursor, zone)
        cursor = change


def _to_wall(instant: datetime, offset: timedelta) -> datetime:
    return instant.astimezone(UTC).replace(tzinfo=None) + offset


def _to_utc(wall: datetime, offset: timedelta) -> datetime:
    return (wall - offset).replace(tzinfo=UTC)


def rule_coverage(
    rule: Rule, start: datetime, end: datetime, zone: ZoneInfo, pieces=None
) -> list[tuple[datetime, datetime]]:
    """UTC intervals within [start, end) (aware datetimes) that ``rule`` covers."""
    pieces = pieces if pieces is not None else list(offset_pieces(start, end, zone))
    covered = []
    for piece_start, piece_end, offset in pieces:
        wall = wall_coverage(rule, _to_wall(piece_start, offset), _to_wall(piece_end, offset))
        covered += [(_to_utc(s, offset), _to_utc(e, offset)) for s, e in wall]
    return merge(covered)


def rules_coverage(rules: Iterable[Rule], start: datetime, end: datetime, zone: ZoneInfo):
    """UTC intervals covered by any of ``rules``: chained grants add up."""
    pieces = list(offset_pieces(start, end, zone))
    return merge(i for rule in rules for i in rule_coverage(rule, start, end, zone, pieces))


# --- the database side ------------------------------------------------------------------------


def grants_of(principal) -> list[Grant]:
    """Grants naming a user (directly or through their groups), or naming a group, with what
    coverage reads of them: their windows, and the hosts or GPUs (ids only) of scoped grants.

    Every start asks this (the start rule): it is kept until the access facts change
    (accesscontrol.changes), and read only as far as a grant's scope needs: a grant of all
    devices, the usual kind, costs no query for hosts or GPUs.
    """
    kind = "group" if isinstance(principal, Group) else "user"
    key = ("grants", kind, principal.pk)
    current, grants = changes.recall(key)
    if grants is changes.MISSING:
        grants = changes.keep(current, key, _read_grants(principal))
    return list(grants)


def _read_grants(principal) -> list[Grant]:
    if isinstance(principal, Group):
        query = Grant.objects.filter(groups=principal)
    else:
        query = Grant.objects.filter(Q(users=principal) | Q(groups__user=principal)).distinct()
    grants = list(query)
    prefetch_related_objects(grants, "windows")
    for scope, related, model in _SCOPED:
        scoped = [grant for grant in grants if grant.scope == scope]
        if scoped:
            ids_only = model.objects.only("pk").order_by()
            prefetch_related_objects(scoped, Prefetch(related, queryset=ids_only))
    return grants


_SCOPED = ((Grant.Scope.HOSTS, "hosts", Host), (Grant.Scope.DEVICES, "devices", Device))


def _check_range(start: datetime, end: datetime) -> None:
    if timezone.is_naive(start) or timezone.is_naive(end):
        raise ValueError("start and end must be aware datetimes")


def active_ban(user, at: datetime | None = None) -> Ban | None:
    """The ban in force on ``user`` at ``at`` (default: now), the longest-lasting one first."""
    if not getattr(user, "pk", None):
        return None
    at = at or timezone.now()
    in_force = [ban for ban in _bans_of(user) if ban.created <= at and _lasts_past(ban, at)]
    return max(in_force, key=lambda ban: ban.until or END_OF_TIME, default=None)


def bans_during(user, start: datetime, end: datetime) -> list[Ban]:
    """Bans of ``user`` overlapping [start, end), newest first: a ban runs from ``created``
    to ``until``."""
    return [ban for ban in _bans_of(user) if ban.created < end and _lasts_past(ban, start)]


def _bans_of(user) -> list[Ban]:
    """Every ban of ``user``, newest first, kept until the access facts change (a user has
    few; every start and booking asks). Callers filter copies, never the list."""
    key = ("bans", user.pk)
    current, bans = changes.recall(key)
    if bans is changes.MISSING:
        bans = changes.keep(current, key, list(Ban.objects.filter(user_id=user.pk)))
    return bans


def _lasts_past(ban: Ban, instant: datetime) -> bool:
    return ban.until is None or ban.until > instant


def _ban_periods(bans: list[Ban]) -> list[tuple[datetime, datetime]]:
    return merge((ban.created, ban.until or END_OF_TIME) for ban in bans)


def covered_intervals(principal, device: Device, start: datetime, end: datetime) -> list[tuple]:
    """UTC intervals of [start, end) in which ``principal`` (user or group) may use ``device``."""
    return coverage_map(principal, start, end, [device])[device]


def coverage_map(
    principal, start: datetime, end: datetime, devices: Sequence[Device] | None = None
) -> dict[Device, list[tuple[datetime, datetime]]]:
    """Covered UTC intervals of [start, end) per device (default: every present device).

    A user banned now has no coverage at all; a ban that starts later removes its own period.
    """
    _check_range(start, end)
    if devices is None:
        devices = list(Device.objects.filter(status=Device.Status.PRESENT).select_related("host"))
    with changes.one_token():  # the bans and the grants kept under one reading of it
        bans = []
        if not isinstance(principal, Group):
            if active_ban(principal) is not None:
                return {device: [] for device in devices}
            bans = bans_during(principal, start, end)
        return _coverage(principal, start, end, devices, bans)


def _coverage(principal, start, end, devices, bans: list[Ban]) -> dict[Device, list[tuple]]:
    """coverage_map once the bans are known (the principal is not banned now)."""
    banned = _ban_periods(bans)
    zone = site_zone()
    pieces = list(offset_pieces(start, end, zone))
    per_grant = [
        (g, rule_coverage(Rule.of(g), start, end, zone, pieces)) for g in grants_of(principal)
    ]
    coverage = {}
    for device in devices:
        covered = merge(i for g, c in per_grant if g.covers_device(device) for i in c)
        coverage[device] = [gap for s, e in covered for gap in gaps(banned, s, e)]
    return coverage


def check_access(user, device: Device, start: datetime, end: datetime) -> AccessDecision:
    """May ``user`` use ``device`` over [start, end)? If not, which parts are missing and why.

    Default deny; grants chain (together they may cover what none covers alone). A user
    banned now is refused the whole period, with the ban's reason; a ban starting later
    refuses the part it overlaps. Admin changes count at once: the bans and grants it reads
    are kept only while nothing they come from changed (accesscontrol.changes).
    """
    _check_range(start, end)
    if start >= end:
        return AccessDecision(False, [], "the period is empty: it must end after it starts")
    ban = active_ban(user)
    if ban is not None:
        return AccessDecision(False, [(start, end)], ban_sentence(user, ban))
    later_bans = bans_during(user, start, end)
    uncovered = gaps(_coverage(user, start, end, [device], later_bans)[device], start, end)
    if not uncovered:
        return AccessDecision(True)
    if later_bans:
        return AccessDecision(False, uncovered, ban_sentence(user, later_bans[0]))
    return AccessDecision(False, uncovered, uncovered_sentence(user, device, uncovered))


# --- sentences --------------------------------------------------------------------------------


def local_text(instant: datetime, zone: ZoneInfo | None = None) -> str:
    """E.g. 'Sat 29 Mar 22:00', in the site zone: the site's one time format."""
    return absolute(instant, zone or site_zone())


def ban_sentence(user, ban: Ban) -> str:
    until = f"until {local_text(ban.until)}" if ban.until else "until an admin lifts the ban"
    since = f" from {local_text(ban.created)}" if ban.created > timezone.now() else ""
    return f"{user} is banned{since} {until}: {ban.reason}"


def covers_next_minute(covered: list[tuple], now: datetime) -> bool:
    """Whether coverage (as coverage_map gives it from ``now``) lets work start at ``now``."""
    return bool(covered) and covered[0][0] <= now and covered[0][1] >= now + ONE_MINUTE


def waiting_sentence(user, device: Device, covered: list[tuple], now: datetime) -> str:
    """Why ``user`` may not start on ``device`` at ``now``, from the coverage ahead of now:
    when they may next (the real window, not the minute the start rule looks at), or that
    no grant covers it in all that time."""
    if not covered:
        return f"{user} is not allowed on {device}: no grant covers it now or later; ask an admin"
    zone = site_zone()
    start, end = covered[0]
    if start <= now:  # allowed now, but not for the minute a start needs
        return f"{user} is allowed on {device} only until {local_text(end, zone)} ({zone.key})"
    return f"{user} is not allowed on {device} until {local_text(start, zone)} ({zone.key})"


def uncovered_sentence(user, device: Device, uncovered: list[tuple], shown: int = 3) -> str:
    """'owner is not allowed on node-1:0 from Sat 29 Mar 22:00 to Sun 30 Mar 06:00 (UTC)'."""
    zone = site_zone()
    parts = [f"from {local_text(s, zone)} to {local_text(e, zone)}" for s, e in uncovered[:shown]]
    more = len(uncovered) - shown
    tail = f" and {more} more period{'s' if more > 1 else ''}" if more > 0 else ""
    return f"{user} is not allowed on {device} {', '.join(parts)}{tail} ({zone.key})"
