"""The one test of an integer argument or field: an ``int`` that is not a ``bool``, within bounds."""

from __future__ import annotations


def is_int(value, low: int | None = None, high: int | None = None) -> bool:
    """An int, not a bool (``True`` is an int to Python, never a count to us), within ``[low, high]`` where given."""
    return (isinstance(value, int) and not isinstance(value, bool) and (low is None or value >= low)
            and (high is None or value <= high))
