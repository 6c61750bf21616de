"""A benchmark run as Markdown: the same tables and summary as the terminal."""

from __future__ import annotations

from ..results import BenchResult
from .text import has_kernels, header, kernel_lines, summary_lines, table_rows, warnings_for
from .timing_text import KERNEL_NOTE, TIME_NOTE


def to_markdown(result: BenchResult) -> str:
    gpu = result.provenance.get("gpu", {})
    lines = [f"# cublas_det benchmark — {gpu.get('name', '?')}, cuBLAS {result.provenance.get('cublas_version', '?')}",
             "", f"{result.started}, {result.wall_s:.1f} s", ""]
    kernels = has_kernels(result)
    if any(report.timing for report in result.shapes):
        lines += [TIME_NOTE + (" " + KERNEL_NOTE if kernels else ""), ""]
    columns = header(kernels)
    for report in result.shapes:
        lines += [f"## {report.shape.name} (`{report.shape.spec}`)", ""]
        if report.error:
            lines += [f"error: {report.error}", ""]
        rows = table_rows(report, gpu.get("name", ""), kernels)
        if rows:
            lines.append("| " + " | ".join(columns) + " |")
            lines.append("|" + "---|" * len(columns))
            lines += ["| " + " | ".join(row) + " |" for row in rows]
            lines.append("")
        if kernels:
            lines += [f"- {line}" for line in kernel_lines(report)] + [""]
    lines += ["## Summary", ""] + [f"- {line}" for line in summary_lines(result)]
    notes = warnings_for(result)
    if notes:
        lines += ["", "## Warnings", ""] + [f"- {note}" for note in notes]
    return "\n".join(lines) + "\n"
