"""Half-open intervals [start, end) as sorted, disjoint lists: the algebra of access coverage.

Everything here works on any ordered values (naive or aware datetimes, integers), so the same
four functions serve local wall-clock arithmetic and UTC answers, and are tested on integers.
A "normal" list is sorted, has no empty intervals, and no two intervals overlap or touch.
"""

from collections.abc import Iterable
from typing import Any, Protocol, TypeVar


class Ordered(Protocol):
    """What an interval's ends must be: values that compare (datetimes, numbers)."""

    def __lt__(self, other: Any, /) -> bool: ...
    def __gt__(self, other: Any, /) -> bool: ...
    def __le__(self, other: Any, /) -> bool: ...


T = TypeVar("T", bound=Ordered)


def merge(intervals: Iterable[tuple[T, T]]) -> list[tuple[T, T]]:
    """Normal form of any intervals: sort by start, join those that overlap or touch."""
    merged: list[tuple[T, T]] = []
    for start, end in sorted(i for i in intervals if i[0] < i[1]):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def clip(intervals: list[tuple[T, T]], start: T, end: T) -> list[tuple[T, T]]:
    """The parts of normal ``intervals`` inside [start, end)."""
    return [(max(s, start), min(e, end)) for s, e in intervals if s < end and e > start]


def intersect(a: list[tuple[T, T]], b: list[tuple[T, T]]) -> list[tuple[T, T]]:
    """Intersection of two normal lists (each piece of ``a`` clipped by ``b``)."""
    return merge(piece for s, e in a for piece in clip(b, s, e))


def gaps(covered: list[tuple[T, T]], start: T, end: T) -> list[tuple[T, T]]:
    """The parts of [start, end) that normal ``covered`` leaves out."""
    result: list[tuple[T, T]] = []
    cursor = start
    for s, e in clip(covered, start, end):
        if s > cursor:
            result.append((cursor, s))
        cursor = e
    if cursor < end:
        result.append((cursor, end))
    return result
