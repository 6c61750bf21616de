"""A benchmark run as Markdown: the same tables and summary as the terminal."""

from __future__ import annotations

from ..results import BenchResult
from .text import HEADER, summary_lines, table_rows, warnings_for


def to_markdown(result: BenchResult) -> str:
    gpu = result.provenance.get("gpu", {})
    lines = [f"# cublas_det benchmark — {gpu.get('name', '?')}, cuBLAS {result.provenance.get('cublas_version', '?')}",
             "", f"{result.started}, {result.wall_s:.1f} s", ""]
    for report in result.shapes:
        lines += [f"## {report.shape.name} (`{report.shape.spec}`)", ""]
        if report.error:
            lines += [f"error: {report.error}", ""]
        rows = table_rows(report, gpu.get("name", ""))
        if rows:
            lines.append("| " + " | ".join(HEADER) + " |")
            lines.append("|" + "---|" * len(HEADER))
            lines += ["| " + " | ".join(row) + " |" for row in rows]
            lines.append("")
    lines += ["## Summary", ""] + [f"- {line}" for line in summary_lines(result)]
    notes = warnings_for(result)
    if notes:
        lines += ["", "## Warnings", ""] + [f"- {note}" for note in notes]
    return "\n".join(lines) + "\n"
