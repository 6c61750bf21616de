"""Reports of a benchmark run: terminal table and summary, JSON (pytest-benchmark's shape),
Markdown, a PNG plot, and the comparison with a baseline JSON."""

from __future__ import annotations

import dataclasses
import datetime
import json
import math

from ._check import GemmCheck
from ._timing import AA_ARM, ShapeTiming, quartiles

# Dense peak TFLOP/s by GPU (vendor datasheets, SXM parts): fp32 on CUDA cores, TF32 on tensor cores.
PEAK_TFLOPS = {"H200": (67.0, 495.0), "H100": (67.0, 495.0), "A100": (19.5, 156.0), "L40S": (91.6, 183.0)}
NOISY_REL_IQR = 0.10


def peak_tflops(gpu_name: str, mode: str) -> float | None:
    for key, (fp32, tf32) in PEAK_TFLOPS.items():
        if key in gpu_name:
            return tf32 if mode == "TF32" else fp32
    return None


@dataclasses.dataclass(frozen=True)
class ShapeReport:
    """Everything measured for one shape: a check per mode, the timing, and any error."""

    shape: object  # GemmShape
    checks: dict  # mode name -> GemmCheck
    timing: ShapeTiming | None = None
    error: str | None = None


@dataclasses.dataclass(frozen=True)
class BenchResult:
    shapes: tuple[ShapeReport, ...]
    provenance: dict
    started: str
    wall_s: float
    version: str
    interrupted: bool = False


def check_failures(check: GemmCheck) -> list[str]:
    """Scenarios that broke what cuBLAS documents as reproducible (or could not run)."""
    return [r.scenario for r in check.scenarios if r.error or (r.guaranteed and not r.identical)]


def verdict(check: GemmCheck | None) -> str:
    """'yes', or 'no: <scenarios that changed the bits>' (documented-hazard scenarios included)."""
    if check is None:
        return "-"
    broke = [r.scenario for r in check.scenarios if not r.identical and r.scenario not in ("modes",)]
    return "yes" if not broke else "no: " + ", ".join(broke)


def _fmt_us(value: float | None) -> str:
    if value is None or math.isnan(value):
        return "-"
    return f"{value:,.1f}" if value < 1e4 else f"{value:,.0f}"


def table_rows(report: ShapeReport, gpu_name: str) -> list[list[str]]:
    rows = []
    timing = report.timing
    modes = list(report.checks) or ([a.name for a in timing.arms if a.name != AA_ARM] if timing else [])
    for mode in modes:
        check = report.checks.get(mode)
        arm = timing.arm(mode) if timing else None
        ratio = timing.ratio(mode, "PEDANTIC") if timing else None
        peak = peak_tflops(gpu_name, mode)
        tflops = timing.tflops(mode) if arm else None
        rows.append([
            mode, verdict(check),
            f"{check.rel_error:.1e}" if check and not math.isnan(check.rel_error) else "-",
            _fmt_us(arm.median_us if arm else None), _fmt_us(arm.eager_median_us if arm else None),
            f"{tflops:.1f}" if tflops else "-",
            f"{100 * tflops / peak:.0f}%" if tflops and peak else "-",
            "1 (reference)" if mode == "PEDANTIC" and timing and arm else
            (f"{ratio.median:.3f} [{ratio.ci_low:.3f}, {ratio.ci_high:.3f}]" if ratio else "-"),
        ])
    return rows


HEADER = ["mode", "reproducible", "rel. err", "graph µs", "eager µs", "TFLOP/s", "% peak", "time vs PEDANTIC [95% CI]"]


def layout(header: list[str], rows: list[list[str]]) -> list[str]:
    """The header and rows as lines of left-aligned columns, two spaces apart."""
    widths = [max(len(row[i]) for row in [header] + rows) for i in range(len(header))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in [header] + rows]


def render_text(result: BenchResult) -> str:
    gpu = result.provenance.get("gpu", {})
    lines = [f"cublas_det {result.version} on {gpu.get('name', '?')} ({gpu.get('sm_count', '?')} SMs), "
             f"cuBLAS {result.provenance.get('cublas_version', '?')}, driver {result.provenance.get('driver_version', '?')}",
             ""]
    for report in result.shapes:
        shape = report.shape
        title = f"{shape.name}  {shape.m}x{shape.n}x{shape.k} op {shape.cublas_op}, {shape.flop / 1e9:.3f} GFLOP"
        if report.timing:
            title += (f"  [{report.timing.calls_per_batch} GEMMs/batch, {report.timing.buffer_sets} buffer sets, "
                      f"{report.timing.rounds} rounds]")
        lines.append(title)
        if report.error:
            lines.append(f"  error: {report.error}")
        rows = table_rows(report, gpu.get("name", ""))
        if rows:
            lines += ["  " + line for line in layout(HEADER, rows)]
        lines.append("")
    lines.append("Summary")
    lines += ["  " + line for line in summary_lines(result)]
    notes = warnings_for(result)
    if notes:
        lines.append("Warnings")
        lines += ["  " + note for note in notes]
    return "\n".join(lines)


def _pct(ratio) -> str:
    half = (ratio.ci_high - ratio.ci_low) / 2 * 100
    return f"{(ratio.median - 1) * 100:+.1f}% ± {half:.1f}%"


def summary_lines(result: BenchResult) -> list[str]:
    """The user's three questions answered in words."""
    lines = []
    timed = [r for r in result.shapes if r.timing]
    for report in timed:
        name = report.shape.name
        ped_def = report.timing.ratio("PEDANTIC", "DEFAULT")
        tf32 = report.timing.ratio("TF32", "PEDANTIC")
        parts = []
        if ped_def:
            parts.append(f"PEDANTIC costs {_pct(ped_def)} over DEFAULT")
        if tf32:
            speed = 1 / tf32.median
            parts.append(f"TF32 is {speed:.2f}x faster than PEDANTIC [{1 / tf32.ci_high:.2f}, {1 / tf32.ci_low:.2f}]")
        aa = report.timing.ratio(AA_ARM, "DEFAULT")
        if aa:
            parts.append(f"A/A {aa.median:.3f}")
        if parts:
            lines.append(f"{name}: " + "; ".join(parts))
    hazards: dict[str, list[str]] = {}
    broken: list[str] = []
    for report in result.shapes:
        for mode, check in report.checks.items():
            for r in check.scenarios:
                if not r.identical and r.scenario != "modes" and not r.error:
                    hazards.setdefault(r.scenario, []).append(f"{report.shape.name} {mode}")
            failing = check_failures(check)
            if failing:
                broken.append(f"{report.shape.name} {mode}: {', '.join(failing)}")
    if not result.shapes:
        lines.append("no shape completed")
    elif not hazards:
        lines.append("bits repeated in every scenario, shape and mode checked")
    for scenario, where in hazards.items():
        lines.append(f"bits change under {scenario}: {len(where)} shape/mode pairs (e.g. {', '.join(where[:3])})")
    same = _modes_agreement(result)
    if same:
        lines.append(same)
    if broken:
        lines.append("FAILED (documented as reproducible, yet differed or could not run): " + "; ".join(broken[:5]))
        lines += [f"  {where}: {detail}" for where, detail in _failure_details(result)[:5]]
    return lines


def _failure_details(result: BenchResult) -> list[tuple[str, str]]:
    """(shape and mode, what the failing scenario saw) for each documented-reproducible failure."""
    details = []
    for report in result.shapes:
        for mode, check in report.checks.items():
            failing = check_failures(check)
            for r in check.scenarios:
                if r.scenario in failing:
                    details.append((f"{report.shape.name} {mode}", f"{r}" + (f" ({r.detail})" if r.detail else "")))
    return details


def _modes_agreement(result: BenchResult) -> str:
    groups = []
    for report in result.shapes:
        check = next(iter(report.checks.values()), None)
        modes = check.scenario("modes") if check else None
        if modes and not modes.error:
            groups.append(tuple(tuple(g) for g in modes.extra.get("groups", [])))
    if not groups:
        return ""
    together = sum(any({"DEFAULT", "PEDANTIC"} <= set(g) for g in grouping) for grouping in groups)
    return f"DEFAULT and PEDANTIC gave identical bits on {together} of {len(groups)} shapes"


def warnings_for(result: BenchResult) -> list[str]:
    notes = []
    env = result.provenance.get("env", {})
    if env.get("CUPY_TF32") == "1":
        notes.append("CUPY_TF32=1 is set: cupy.matmul uses TF32 whatever the math mode (this tool's GEMMs do not)")
    if env.get("NVIDIA_TF32_OVERRIDE") == "0":
        notes.append("NVIDIA_TF32_OVERRIDE=0 is set: TF32 requests run in fp32")
    for report in result.shapes:
        check = report.checks.get("TF32")
        if check and not math.isnan(check.rel_error) and check.rel_error < 1e-5:
            notes.append(f"{report.shape.name}: TF32 was requested but not engaged (rel. error "
                         f"{check.rel_error:.1e} looks like fp32)")
        if report.timing:
            for arm in report.timing.arms:
                if arm.rel_iqr > NOISY_REL_IQR:
                    notes.append(f"{report.shape.name} {arm.name}: noisy timing, IQR {100 * arm.rel_iqr:.0f}% of the median")
    return notes


# -- JSON (pytest-benchmark's layout) ----------------------------------------------------------
def benchmark_entry(shape, mode: str, stats: dict | None, extra_info: dict) -> dict:
    """One shape in one mode as a pytest-benchmark entry; --compare matches entries by ``name``."""
    return {"group": shape.name, "name": f"{shape.name}[{mode}]",
            "fullname": f"cublas_det.bench::{shape.name}[{mode}]", "params": {"shape": shape.spec, "mode": mode},
            "param": mode, "stats": stats, "extra_info": extra_info}


def _stats(samples_us) -> dict:
    data = [x * 1e-6 for x in samples_us]
    q1, median, q3 = quartiles(data)
    mean = sum(data) / len(data)
    stddev = (sum((x - mean) ** 2 for x in data) / (len(data) - 1)) ** 0.5 if len(data) > 1 else 0.0
    return {"min": min(data), "max": max(data), "mean": mean, "stddev": stddev, "rounds": len(data),
            "median": median, "iqr": q3 - q1, "q1": q1, "q3": q3, "ops": 1 / mean if mean else 0.0,
            "total": sum(data), "iterations": 1, "data": data}


def to_json(result: BenchResult) -> dict:
    benchmarks = []
    for report in result.shapes:
        modes = list(report.checks)
        if report.timing:  # the arms no check covers, the A/A control included
            modes += [a.name for a in report.timing.arms if a.name not in modes]
        for mode in modes:
            check = report.checks.get(mode)
            arm = report.timing.arm(mode) if report.timing else None
            ratio = report.timing.ratio(mode, "PEDANTIC") if report.timing else None
            benchmarks.append(benchmark_entry(report.shape, mode, _stats(arm.graph_us) if arm else None, {
                    "shape": report.shape.to_dict(),
                    "digest": check.digest if check else None,
                    "rel_error": check.rel_error if check else None,
                    "reproducible": verdict(check),
                    "failures": check_failures(check) if check else [],
                    "scenarios": [r.to_dict() for r in check.scenarios] if check else [],
                    "eager_stats": _stats(arm.eager_us) if arm else None,
                    "calls_per_batch": report.timing.calls_per_batch if report.timing else None,
                    "ratio_to_pedantic": ratio.to_dict() if ratio else None,
                    "error": report.error,
                }))
    ratios = {r.shape.name: [x.to_dict() for x in r.timing.ratios] for r in result.shapes if r.timing}
    return {"machine_info": result.provenance, "commit_info": {}, "benchmarks": benchmarks,
            "datetime": result.started, "version": result.version, "cublas_det": {
                "wall_s": result.wall_s, "interrupted": result.interrupted, "ratios": ratios,
                "summary": summary_lines(result), "warnings": warnings_for(result)}}


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


def write_plot(result: BenchResult, path: str) -> None:
    """Graph-replay time per mode per shape (log scale), TF32 speed-up over PEDANTIC annotated."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as err:
        raise OSError(f"--plot needs matplotlib: pip install 'cublas-det[plot]' ({err})") from err
    timed = [r for r in result.shapes if r.timing]
    modes = [a.name for a in timed[0].timing.arms if a.name != AA_ARM] if timed else []
    fig, ax = plt.subplots(figsize=(max(6, 0.9 * len(timed) + 2), 4.5))
    width = 0.8 / max(1, len(modes))
    for i, mode in enumerate(modes):
        values = [r.timing.arm(mode).median_us if r.timing.arm(mode) else 0 for r in timed]
        ax.bar([x + i * width for x in range(len(timed))], values, width, label=mode)
    for x, report in enumerate(timed):
        ratio = report.timing.ratio("TF32", "PEDANTIC")
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
    fig.savefig(path, dpi=120)
    plt.close(fig)


# -- comparison with a baseline ------------------------------------------------------------------
def load_baseline(path: str) -> dict:
    """Read a JSON written by ``--json``; OSError/ValueError with one line on trouble."""
    try:
        with open(path) as file:
            data = json.load(file)
    except json.JSONDecodeError as err:
        raise ValueError(f"--compare {path}: not JSON ({err})") from None
    if not isinstance(data, dict) or "benchmarks" not in data:
        raise ValueError(f"--compare {path}: not a cublas_det --json file (no 'benchmarks')")
    return data


def _digests(bench: dict) -> set:
    """Every digest an entry holds: one per device for a sweep (--devices), else the one digest."""
    info = bench.get("extra_info", {})
    per_device = info.get("device_digests")
    if per_device:
        return set(per_device.values())
    return {info["digest"]} if info.get("digest") else set()


def compare(baseline: dict, current: dict, fail_on_pct: float | None) -> tuple[list[str], bool]:
    """Bits and times of the shapes present in both runs. Returns (lines, failed).

    Bits are identical when both runs hold one and the same digest, whichever devices computed it
    (a --devices sweep holds one per device), so sweeps of two hosts compare like single runs.
    """
    base = {b["name"]: b for b in baseline.get("benchmarks", [])}
    lines, failed = [], False
    base_gpu = baseline.get("machine_info", {}).get("gpu", {}).get("name", "?")
    lines.append(f"against {base_gpu}, cuBLAS {baseline.get('machine_info', {}).get('cublas_version', '?')}, "
                 f"{baseline.get('datetime', '?')}")
    matched = 0
    for bench in current.get("benchmarks", []):
        old = base.get(bench["name"])
        if old is None:
            continue
        matched += 1
        old_digests, new_digests = _digests(old), _digests(bench)
        bits = ("no digest" if not (old_digests and new_digests) else
                "identical bits" if old_digests == new_digests and len(new_digests) == 1 else "bits DIFFER")
        if bits == "bits DIFFER":
            failed = True
        devices = [len(b["extra_info"].get("device_digests") or {}) for b in (bench, old)]
        if any(devices):
            bits += f" ({devices[0]} device(s) here, {devices[1]} in the baseline)"
        timing = ""
        if old.get("stats") and bench.get("stats"):
            change = (bench["stats"]["median"] / old["stats"]["median"] - 1) * 100
            timing = f", time {change:+.1f}%"
            if fail_on_pct is not None and change > fail_on_pct:
                timing += f" REGRESSION (> {fail_on_pct:g}%)"
                failed = True
        lines.append(f"{bench['name']}: {bits}{timing}")
    if matched == 0:
        lines.append("no shape/mode in common with the baseline")
    return lines, failed


def now_iso() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
