"""Text every report shares: counts in words (``1 leaf``, ``2 leaves``), a share never rounded to
nothing, lines wrapped to a width."""

from __future__ import annotations

import textwrap

IRREGULAR = {"leaf": "leaves", "process": "processes", "kernel launch": "kernel launches"}


def plural(count: int, noun: str) -> str:
    """``1 step``, ``2,000 steps``, ``0 leaves``."""
    return f"{count:,} {noun if count == 1 else IRREGULAR.get(noun, noun + 's')}"


def percent(part: int, whole: int) -> str:
    """``part`` of ``whole`` as a percentage of one decimal; a share of some but under 0.1% is ``<0.1%``
    and one short of all but over 99.9% is ``>99.9%``, never 0.0% or 100.0%."""
    share = 100.0 * part / whole if whole else 0.0
    if 0 < share < 0.1:
        return "<0.1%"
    if 99.9 < share < 100:
        return ">99.9%"
    return f"{share:.1f}%"


def wrapped(text: str, width: int, indent: str = "  ", first: str = "") -> list[str]:
    """``text`` in lines of at most ``width`` columns, the first led by ``first``, the rest by ``indent``.
    Neither a hyphenated name (``fresh-handle``) nor a word longer than a line (a path) is split, so
    either can be copied."""
    return textwrap.wrap(text, width, initial_indent=first, subsequent_indent=indent, break_on_hyphens=False,
                         break_long_words=False) or [first.rstrip()]
