"""The terminal report of a benchmark run: a table per shape, the summary, the warnings."""

from __future__ import annotations

import math

from ..results import BenchResult, GemmCheck, Kind, Outcome, Reproducible, ShapeReport
from ..scenarios import REGISTRY
from ..timing.results import is_control, role
from .timing_text import KERNEL_NOTE, TIME_NOTE, heading_suffix, timing_warnings, trust_suffix
from .verdicts import (
    check_failures,
    hazards_cell,
    modes_cell,
    modes_group,
    reproducible_cell,
)

# Dense peak TFLOP/s by GPU (vendor datasheets, SXM parts): fp32 on CUDA cores, TF32 and bf16/fp16 on tensor cores.
PEAK_TFLOPS = {"H200": (67.0, 495.0, 989.5), "H100": (67.0, 495.0, 989.5), "A100": (19.5, 156.0, 312.0),
               "L40S": (91.6, 183.0, 362.1)}
NOISY_REL_IQR = 0.10
HEADER = ["mode", "reproducible", "hazards: bits changed by", "same bits as", "rel. err", "graph µs", "eager µs",
          "TFLOP/s", "% peak", "time vs PEDANTIC [95% CI]"]
KERNEL_HEADER = ["kernel µs", "kernels"]  # with --kernels


def peak_tflops(gpu_name: str, mode: str) -> float | None:
    """The peak of what a configuration runs on: half-precision inputs and TF32 on tensor cores, else fp32."""
    for key, (fp32, tf32, half) in PEAK_TFLOPS.items():
        if key in gpu_name:
            if "float16->" in mode or "bfloat16->" in mode:
                return half
            return tf32 if mode.startswith("TF32") else fp32
    return None


def _fmt_us(value: float | None) -> str:
    if value is None or math.isnan(value):
        return "-"
    return f"{value:,.1f}" if value < 1e4 else f"{value:,.0f}"


def has_kernels(result: BenchResult) -> bool:
    """Whether the run recorded kernels (--kernels): the tables then carry the kernel columns."""
    return any(check.kernels for _, check in _checks(result)) or any(
        arm.kernel_us is not None for report in result.shapes if report.timing for arm in report.timing.arms)


def header(kernels: bool) -> list[str]:
    """The table's columns: with the kernel columns when the run recorded kernels (:func:`has_kernels`)."""
    return HEADER + KERNEL_HEADER if kernels else HEADER


def _kernel_cells(check: GemmCheck | None, arm) -> list[str]:
    """Kernel time per GEMM (CUPTI, held graph replays) and the reference call's kernels, briefly."""
    return [_fmt_us(arm.kernel_us if arm else None), check.kernels.brief() if check and check.kernels else "-"]


def table_rows(report: ShapeReport, gpu_name: str, kernels: bool = False) -> list[list[str]]:
    rows = []
    timing = report.timing
    modes = list(report.checks) or ([a.name for a in timing.arms if not is_control(a.name)] if timing else [])
    for mode in modes:
        check = report.checks.get(mode)
        arm = timing.arm(mode) if timing else None
        reference = timing.arm_name("PEDANTIC") if timing else None
        ratio = timing.ratio(mode, reference) if timing and reference else None
        peak = peak_tflops(gpu_name, mode)
        tflops = timing.tflops(mode) if arm else None
        rows.append([
            mode, reproducible_cell(check), hazards_cell(check), modes_cell(check),
            f"{check.rel_error:.1e}" if check and not math.isnan(check.rel_error) else "-",
            _fmt_us(arm.median_us if arm else None), _fmt_us(arm.eager_median_us if arm else None),
            f"{tflops:.1f}" if tflops else "-",
            f"{100 * tflops / peak:.0f}%" if tflops and peak else "-",
            "1 (reference)" if mode == reference and arm else
            (f"{ratio.median:.3f} [{ratio.ci_low:.3f}, {ratio.ci_high:.3f}]{trust_suffix(timing)}" if ratio else "-"),
        ] + (_kernel_cells(check, arm) if kernels else []))
    return rows


def layout(header: list[str], rows: list[list[str]]) -> list[str]:
    """The header and rows as lines of left-aligned columns, two spaces apart."""
    widths = [max(len(row[i]) for row in [header] + rows) for i in range(len(header))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in [header] + rows]


def title(result: BenchResult) -> str:
    gpu = result.provenance.get("gpu", {})
    return (f"cublas_det {result.version} on {gpu.get('name', '?')} ({gpu.get('sm_count', '?')} SMs), "
            f"cuBLAS {result.provenance.get('cublas_version', '?')}, driver {result.provenance.get('driver_version', '?')}")


def render_text(result: BenchResult) -> str:
    gpu = result.provenance.get("gpu", {})
    lines = [title(result), ""]
    kernels = has_kernels(result)
    if any(report.timing for report in result.shapes):
        lines += [TIME_NOTE + (" " + KERNEL_NOTE if kernels else ""), ""]
    for report in result.shapes:
        shape = report.shape
        heading = f"{shape.name}  {shape.m}x{shape.n}x{shape.k} op {shape.cublas_op}, {shape.flop / 1e9:.3f} GFLOP"
        if report.timing:
            heading += heading_suffix(report.timing)
        lines.append(heading)
        if report.timing and not report.timing.trusted:
            lines.append(f"  ratios not trusted: {report.timing.untrusted_reason}")
        if report.error:
            lines.append(f"  error: {report.error}")
        rows = table_rows(report, gpu.get("name", ""), kernels)
        if rows:
            lines += ["  " + line for line in layout(header(kernels), rows)]
        if kernels:
            lines += ["  " + line for line in kernel_lines(report)]
        lines.append("")
    lines.append("Summary")
    lines += ["  " + line for line in summary_lines(result)]
    notes = warnings_for(result)
    if notes:
        lines.append("Warnings")
        lines += ["  " + note for note in notes]
    return "\n".join(lines)


def kernel_lines(report: ShapeReport) -> list[str]:
    """Every kernel each configuration's reference call ran, with its grid (the table shows them briefly)."""
    return [f"kernels {mode}: {check.kernels.describe()}" for mode, check in report.checks.items() if check.kernels]


def _pct(ratio) -> str:
    half = (ratio.ci_high - ratio.ci_low) / 2 * 100
    return f"{(ratio.median - 1) * 100:+.1f}% ± {half:.1f}%"


def _checks(result: BenchResult) -> list[tuple[str, GemmCheck]]:
    return [(f"{report.shape.name} {mode}", check) for report in result.shapes for mode, check in report.checks.items()]


def summary_lines(result: BenchResult) -> list[str]:
    """The user's three questions answered in words: cost, reproducibility (guarantees), findings (hazards)."""
    lines = _timing_lines(result)
    checks = _checks(result)
    if not result.shapes:
        return lines + ["no shape completed"]
    lines += reproducibility_lines(checks)
    lines += finding_lines(checks)
    same = _modes_agreement(result)
    if same:
        lines.append(same)
    return lines + precision_lines(result)


def _short(cell: str) -> str:
    """A matrix cell's name without element types and the default compute type, for a sentence."""
    parts = [p for p in cell.split("/") if "->" not in p and p != "COMPUTE_32F"]
    return "/".join(parts)


def precision_lines(result: BenchResult) -> list[str]:
    """In half precision: which configurations gave PEDANTIC's bits (the modes matrix), which changed them,
    and what the others cost against PEDANTIC."""
    same, changed, shapes, dtype = {}, {}, 0, ""
    for report in result.shapes:
        check = next(iter(report.checks.values()), None)
        modes = check.scenario("modes") if check else None
        if check is None or check.config.input_dtype == "float32" or modes is None or modes.error \
                or "all_groups" not in modes.extra:
            continue
        shapes += 1
        dtype = check.config.input_dtype
        base = f"PEDANTIC/{check.config.input_dtype}->{check.config.output_dtype}/COMPUTE_32F"
        group = next((g for g in modes.extra["all_groups"] if base in g), [base])
        for cell in modes.extra["matrix"]:
            target = same if cell in group else changed
            target[_short(cell)] = target.get(_short(cell), 0) + 1
    if not shapes:
        return []
    always = [name for name, count in same.items() if count == shapes and name not in changed]
    line = f"{dtype}: {', '.join(always)} gave identical bits on all {shapes} shapes"
    if changed:
        line += "; " + ", ".join(f"{name} changed them ({count} of {shapes})" for name, count in changed.items())
    costs = {}
    for report in result.shapes:
        timing = report.timing
        pedantic = timing.arm_name("PEDANTIC") if timing else None
        for arm in timing.arms if pedantic else ():
            ratio = timing.ratio(arm.name, pedantic)
            if ratio and role(arm.name) not in ("PEDANTIC", "DEFAULT") and not is_control(arm.name):
                costs.setdefault(role(arm.name), []).append(ratio.median)
    for name, ratios in costs.items():
        low, high = f"{min(ratios):.1f}", f"{max(ratios):.1f}"
        line += f"; {name} takes {low if low == high else f'{low}-{high}'}x the time of PEDANTIC"
    return [line]


def _timing_lines(result: BenchResult) -> list[str]:
    lines = []
    for report in result.shapes:
        if not report.timing:
            continue
        timing = report.timing
        ped_def = timing.ratio_by_role("PEDANTIC", "DEFAULT")
        parts = []
        if ped_def:
            parts.append(f"PEDANTIC costs {_pct(ped_def)} over DEFAULT")
        pedantic = timing.arm_name("PEDANTIC")
        for arm in timing.arms:  # every other configuration against PEDANTIC: TF32, COMPUTE_32F_PEDANTIC ...
            ratio = timing.ratio(arm.name, pedantic) if pedantic else None
            if ratio is None or role(arm.name) in ("PEDANTIC", "DEFAULT"):
                continue
            if ratio.median < 1:
                parts.append(f"{role(arm.name)} is {1 / ratio.median:.2f}x faster than PEDANTIC "
                             f"[{1 / ratio.ci_high:.2f}, {1 / ratio.ci_low:.2f}]")
            else:
                parts.append(f"{role(arm.name)} takes {ratio.median:.2f}x the time of PEDANTIC "
                             f"[{ratio.ci_low:.2f}, {ratio.ci_high:.2f}]")
        aa = report.timing.aa_ratio
        if aa:
            parts.append(f"A/A {aa.median:.3f}" + ("" if report.timing.trusted else ": ratios not trusted"))
        if parts:
            lines.append(f"{report.shape.name}: " + "; ".join(parts))
    return lines


def reproducibility_lines(checks: list[tuple[str, GemmCheck]]) -> list[str]:
    """The verdict on the guarantee scenarios, counted: never a claim about what did not run."""
    if not checks:
        return ["reproducible: not checked (no scenario ran)"]
    counts = {verdict: [where for where, c in checks if c.verdict is verdict] for verdict in Reproducible}
    ran = sorted({r.scenario for _, c in checks for r in c.of_kind(Kind.GUARANTEE) if r.outcome in (
        Outcome.IDENTICAL, Outcome.DIFFER)}, key=list(REGISTRY).index)
    total = len(checks)
    lines = []
    if len(counts[Reproducible.YES]) == total:
        lines.append(f"reproducible: yes for all {total} shape/mode pairs: bits repeated in every guarantee scenario "
                     f"checked ({', '.join(ran)})")
    else:
        parts = [f"{verdict.value} {len(where)}" for verdict, where in counts.items() if where]
        lines.append(f"reproducible, of {total} shape/mode pairs: " + ", ".join(parts)
                     + (f" (guarantee scenarios checked: {', '.join(ran)})" if ran else ""))
    if counts[Reproducible.NOT_CHECKED]:
        lines.append(f"not checked (no guarantee scenario ran): {len(counts[Reproducible.NOT_CHECKED])} pairs")
    failures = [(where, r) for where, c in checks for r in c.guarantee_failures]
    if failures:
        lines.append("FAILED (documented as reproducible, yet gave other bits): "
                     + "; ".join(f"{where}: {r.scenario}" for where, r in failures[:5]))
        lines += [f"  {where}: {r}" + (f" ({r.detail})" if r.detail else "") for where, r in failures[:5]]
    errors = [(where, r) for where, c in checks for r in c.errors]
    if errors:
        lines.append(f"could not run ({len(errors)} scenario runs): "
                     + "; ".join(f"{where} {r.scenario}: {r.error}" for where, r in errors[:3]))
    return lines


def finding_lines(checks: list[tuple[str, GemmCheck]]) -> list[str]:
    """Per hazard that ran: in how many pairs it changed the bits (a finding, as cuBLAS warns), and where
    it does not apply."""
    lines = []
    for name, scenario in REGISTRY.items():
        if scenario.kind is not Kind.HAZARD:
            continue
        results = [(where, c.scenario(name)) for where, c in checks if c.scenario(name) is not None]
        ran = [(where, r) for where, r in results if r.outcome in (Outcome.IDENTICAL, Outcome.DIFFER)]
        skipped = [r for _, r in results if r.outcome is Outcome.NOT_APPLICABLE]
        if not ran and not skipped:
            continue
        changed = [where for where, r in ran if r.changed_bits]
        text = (f"finding: bits change with the {scenario.label} ({name}) in {len(changed)} of {len(ran)} shape/mode "
                f"pairs" + (f" (e.g. {', '.join(changed[:3])})" if changed else ""))
        if skipped:
            text += f"; not applicable to {len(skipped)} ({skipped[0].not_applicable})"
        lines.append(text)
        lines += [f"  why (kernels): {where}, {label}: {change}" for where, r in ran if r.changed_bits
                  for label, change in list(r.extra.get("kernel_changes", {}).items())[:1]][:3]
    return lines


def _modes_agreement(result: BenchResult) -> str:
    groups = []
    for report in result.shapes:
        check = next(iter(report.checks.values()), None)
        if modes_group(check) is not None:
            groups.append(check.scenario("modes").extra["groups"])
    if not groups:
        return ""
    together = sum(any({"DEFAULT", "PEDANTIC"} <= {role(name) for name in g} for g in grouping) for grouping in groups)
    return f"modes: DEFAULT and PEDANTIC gave identical bits on {together} of {len(groups)} shapes"


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
    notes += timing_warnings(result)
    return notes


def run_failed(result: BenchResult) -> bool:
    """Exit-1 condition of a benchmark: a guarantee failed or something could not run."""
    return any(check_failures(check) for _, check in _checks(result)) or any(r.error for r in result.shapes)


__all__ = ["HEADER", "header", "kernel_lines", "layout", "peak_tflops", "render_text", "run_failed", "summary_lines", "table_rows",
           "warnings_for"]
