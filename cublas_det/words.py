"""Counts in words, for every report: ``1 leaf``, ``2 leaves``; a share that is never rounded to nothing."""

from __future__ import annotations

IRREGULAR = {"leaf": "leaves"}


def plural(count: int, noun: str) -> str:
    """``1 step``, ``2 steps``, ``0 leaves``."""
    return f"{count} {noun if count == 1 else IRREGULAR.get(noun, noun + 's')}"


def percent(part: int, whole: int) -> str:
    """``part`` of ``whole`` as a percentage of one decimal; a share that would round to 0.0% or 100.0%
    without being it is ``<0.1%`` or ``>99.9%``."""
    share = 100.0 * part / whole if whole else 0.0
    if 0 < share < 0.05:
        return "<0.1%"
    if 99.95 <= share < 100:
        return ">99.9%"
    return f"{share:.1f}%"
