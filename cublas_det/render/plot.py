"""A PNG of time per configuration per shape (needs matplotlib)."""

from __future__ import annotations

from ..bindings.cublas import MathMode
from ..results.bench import BenchResult


def plot(result: BenchResult):
    """Graph-replay time per mode per shape (log scale), TF32 speed-up over PEDANTIC annotated: a matplotlib
    ``Figure``, made without pyplot (no backend, nothing left open), which the caller saves."""
    try:
        from matplotlib.figure import Figure
    except ImportError as err:
        raise OSError(f"--plot needs matplotlib: pip install matplotlib ({err})") from err
    timed = [r for r in result.shapes if r.timing]
    modes = [a.name for a in timed[0].timing.arms if not a.name.control] if timed else []
    fig = Figure(figsize=(max(6, 0.9 * len(timed) + 2), 4.5), dpi=120)
    ax = fig.subplots()
    width = 0.8 / max(1, len(modes))
    for i, mode in enumerate(modes):
        values = [r.timing.arm(mode).median_us if r.timing.arm(mode) else 0 for r in timed]
        ax.bar([x + i * width for x in range(len(timed))], values, width, label=mode)
    for x, report in enumerate(timed):
        ratio = report.timing.ratio_for(MathMode.TF32, MathMode.PEDANTIC)
        if ratio:
            top = max(a.median_us for a in report.timing.arms)
            ax.annotate(f"{1 / ratio.median:.1f}x", (x + 0.4, top), ha="center", va="bottom", fontsize=7)
    ax.set_yscale("log")
    ax.set_ylabel("µs per GEMM (CUDA-graph replay, median)")
    ax.set_xticks([x + 0.4 - width / 2 for x in range(len(timed))])
    ax.set_xticklabels([r.shape.name for r in timed], rotation=60, ha="right", fontsize=7)
    ax.legend(title="math mode (label: TF32 speed-up)")
    ax.set_title(f"cublas_det on {result.provenance.get('gpu', {}).get('name', '?')}")
    fig.tight_layout()
    return fig
