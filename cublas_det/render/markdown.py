"""A benchmark run as Markdown: the same answer, tables and warnings as the terminal, every column kept."""

from __future__ import annotations

from ..results.bench import BenchResult
from .text import (LEGEND, detail_lines, has_kernels, header, kernel_lines, summary_lines, table_rows,
                   title, warnings_for)
from .timing_text import KERNEL_NOTE, TIME_NOTE


def to_markdown(result: BenchResult, notes=()) -> str:
    """``notes``: as :func:`~cublas_det.render.text.render_text`'s, under the title."""
    lines = [f"# {title(result)}", "", result.started, ""] + [f"{note}  " for note in notes] + ([""] if notes else [])
    lines += [f"- {line}" for line in summary_lines(result)] + [""]
    details = detail_lines(result)
    if details:
        lines += [f"- {line}" for line in details] + [""]
    kernels = has_kernels(result)
    if any(report.timing for report in result.shapes):
        lines += [TIME_NOTE + (" " + KERNEL_NOTE if kernels else ""), ""]
    lines += [LEGEND, ""]
    columns = header(kernels)
    for report in result.shapes:
        lines += [f"## {report.shape.name} (`{report.shape.spec}`)", ""]
        if report.error:
            lines += [f"error: {report.error}", ""]
        rows = table_rows(report, kernels)
        if rows:
            lines += ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
            lines += ["| " + " | ".join(row) + " |" for row in rows] + [""]
        if kernels:
            lines += [f"- {line}" for line in kernel_lines(report)] + [""]
    notes = warnings_for(result)
    if notes:
        lines += ["## Warnings", ""] + [f"- {note}" for note in notes]
    return "\n".join(lines) + "\n"
