"""The interval algebra, checked against sets of integer points."""

from hypothesis import given
from hypothesis import strategies as st

from accesscontrol.intervals import clip, gaps, intersect, merge

interval = st.tuples(st.integers(0, 60), st.integers(0, 60))
intervals = st.lists(interval, max_size=8)


def points(items) -> set[int]:
    return {p for s, e in items for p in range(s, e)}


def is_normal(items) -> bool:
    pairs = zip(items, items[1:], strict=False)
    return all(s < e for s, e in items) and all(a[1] < b[0] for a, b in pairs)


@given(intervals)
def test_it_merges_into_the_same_points_in_normal_form(items):
    merged = merge(items)
    assert is_normal(merged)
    assert points(merged) == points(items)


@given(intervals, intervals)
def test_it_intersects(a, b):
    result = intersect(merge(a), merge(b))
    assert is_normal(result)
    assert points(result) == points(a) & points(b)


@given(intervals, st.integers(0, 60), st.integers(0, 60))
def test_it_clips_and_finds_gaps(items, start, end):
    merged = merge(items)
    window = set(range(start, end))
    assert points(clip(merged, start, end)) == points(merged) & window
    missing = gaps(merged, start, end)
    assert is_normal(missing)
    assert points(missing) == window - points(merged)


def test_it_keeps_touching_intervals_apart_only_when_they_do_not_touch():
    assert merge([(3, 5), (1, 3), (7, 9)]) == [(1, 5), (7, 9)]
    assert gaps([(1, 5), (7, 9)], 0, 10) == [(0, 1), (5, 7), (9, 10)]
