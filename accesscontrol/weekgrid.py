"""The week grid: covered intervals turned into positioned bars, one row per set of GPUs.

GPUs with the same coverage share a row, so a lab of forty identical GPUs is one line.
Positions are fractions of each local day's real length (23 or 25 hours across DST).
"""

from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from .intervals import clip


@dataclass(frozen=True)
class Day:
    day: date
    start: datetime
    end: datetime


@dataclass(frozen=True)
class Bar:
    left: float  # percent of the day
    width: float
    label: str


@dataclass
class Row:
    devices: list
    days: list[list[Bar]]

    @property
    def label(self) -> str:
        return ", ".join(str(d) for d in self.devices)


def week_days(any_day: date, zone: ZoneInfo) -> list[Day]:
    """The Monday-to-Sunday week holding ``any_day``, each day as aware local midnights."""
    monday = any_day - timedelta(days=any_day.weekday())
    days = [monday + timedelta(days=i) for i in range(8)]
    edges = [datetime.combine(d, time(), tzinfo=zone) for d in days]
    return [Day(days[i], edges[i], edges[i + 1]) for i in range(7)]


def _clock(instant: datetime, day: Day, zone: ZoneInfo) -> str:
    return "24:00" if instant == day.end else f"{instant.astimezone(zone):%H:%M}"


def day_bars(covered: list[tuple], day: Day, zone: ZoneInfo) -> list[Bar]:
    length = (day.end - day.start).total_seconds()
    return [
        Bar(
            left=round(100 * (s - day.start).total_seconds() / length, 3),
            width=round(100 * (e - s).total_seconds() / length, 3),
            label=f"{_clock(s, day, zone)}–{_clock(e, day, zone)}",
        )
        for s, e in clip(covered, day.start, day.end)
    ]


def week_rows(coverage: dict, days: list[Day], zone: ZoneInfo) -> list[Row]:
    """Rows of the grid, devices with identical coverage grouped, in device order."""
    rows: dict[tuple, Row] = {}
    for device, covered in coverage.items():
        key = tuple(covered)
        if key not in rows:
            rows[key] = Row([], [day_bars(covered, day, zone) for day in days])
        rows[key].devices.append(device)
    return list(rows.values())
