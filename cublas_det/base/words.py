"""Text every report shares: counts in words (``1 leaf``, ``2 leaves``), a share never rounded to
nothing, sizes in binary units, lines wrapped to the report's width, and tables of aligned columns."""

from __future__ import annotations

import os
import shutil
import sys
import textwrap

WIDTH = 100  # a report's lines, unless a wider terminal asks for more
IRREGULAR = {"leaf": "leaves", "process": "processes", "kernel launch": "kernel launches"}
UNITS = (("G", 30), ("M", 20), ("K", 10))


def report_width() -> int:
    """100 columns, or more where ``COLUMNS`` asks for more or standard output is a wider terminal."""
    if os.environ.get("COLUMNS", "").isdigit() or sys.stdout.isatty():
        return max(WIDTH, shutil.get_terminal_size((WIDTH, 24)).columns)
    return WIDTH


def noun_for(count: int, noun: str) -> str:
    """The noun alone, as ``count`` of it is said."""
    return noun if count == 1 else IRREGULAR.get(noun, noun + "s")


def plural(count: int, noun: str) -> str:
    return f"{count:,} {noun_for(count, noun)}"


def percent(part: int, whole: int) -> str:
    """``part`` of ``whole`` as a percentage of one decimal, never 0.0% for some nor 100.0% for not all."""
    share = 100.0 * part / whole if whole else 0.0
    if 0 < share < 0.1:
        return "<0.1%"
    if 99.9 < share < 100:
        return ">99.9%"
    return f"{share:.1f}%"


def size(n: float, unit: str = "", places: int | None = None) -> str:
    """``n`` bytes: briefly in the largest binary unit, to 3 digits (``1.5G``, ``32M``, ``100``); in ``unit``
    (``"MiB"``, ``"GiB"``) as it is (``0.5 MiB``) or to ``places`` decimals (``79.6 GiB``)."""
    if unit:
        value = n / 2 ** dict(UNITS)[unit[0]]
        return f"{value:g} {unit}" if places is None else f"{value:,.{places}f} {unit}"
    for letter, shift in UNITS:
        if n >= 1 << shift:
            return f"{n / (1 << shift):.3g}{letter}"
    return str(n)


def wrapped(text, width: int = WIDTH, indent: str = "  ", first: str = "") -> list[str]:
    """``text`` in lines of ``width`` columns led by ``first``, then ``indent``; no word or hyphenated name split.
    Several texts (any iterable of them) are each wrapped so, one after the other: every report's one wrapper."""
    if not isinstance(text, str):
        return [line for one in text for line in wrapped(one, width, indent, first)]
    return textwrap.wrap(text, width, initial_indent=first, subsequent_indent=indent, break_on_hyphens=False,
                         break_long_words=False) or [first.rstrip()]


def column_widths(rows) -> list[int]:
    return [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]


def table(rows, indent: str = "", gap: str = "  ", right=(), widths=None) -> list[str]:
    """``rows`` (the header first) as aligned columns ``gap`` apart, left-aligned but the ``right`` ones."""
    widths = widths or column_widths(rows)
    return [(indent + gap.join(cell.rjust(width) if i in right else cell.ljust(width)
                               for i, (cell, width) in enumerate(zip(row, widths)))).rstrip() for row in rows]


def listing(names, most: int = 5) -> str:
    """``a, b, c`` or ``a, b, c, d, e and 7 more``."""
    names = list(names)
    return ", ".join(names[:most]) + (f" and {len(names) - most} more" if len(names) > most else "")
