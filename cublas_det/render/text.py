"""A benchmark run's terminal report (:class:`~cublas_det.results.bench.BenchResult`): the answers (reproducible?
which hazards? what cost?) first, then a table per shape, then the warnings, within the report's width."""

from __future__ import annotations

import dataclasses
import math
from collections import Counter

from ..bindings.cublas import ComputeType, MathMode
from ..check.cures import Prescription, cures_in_run  # the one judge and ranking of cures, prescribe's
from ..results.bench import BenchResult, ShapeReport
from ..results.check import GemmCheck, Kind, Outcome, Reproducible, check_failures, modes_group
from ..check.scenarios import REGISTRY
from ..core.config import DEFAULT_MODES, HALF_DEFAULT_MODES, name_role
from ..core.device import describe_machine
from ..base.errors import ExitCode
from ..core.shapes import DEFAULT_PRESETS, DEFAULT_TOKENS
from ..results.timing import is_control
from ..base.words import column_widths, plural, report_width, table, wrapped
from .timing_text import KERNEL_NOTE, NOT_TRUSTED, TIME_NOTE, how_timed, timing_warnings

NOISY_REL_IQR = 0.10
HEADER = ["mode", "repro", "changed by", "same bits as", "rel. err", "graph µs", "eager µs", "TFLOP/s", "vs PEDANTIC"]
KERNEL_HEADER = ["kernel µs", "kernels"]  # with --kernels
OPTIONAL = ("kernels", "TFLOP/s", "eager µs", "rel. err")  # left out of a narrow report, the first first
LEGEND = ("repro: the guarantees gave the same bits (which did not: above); changed by: the hazards that changed "
          "them; same bits as: the modes with this one's bits. graph µs: per GEMM in a CUDA-graph replay; eager µs: "
          "launched from Python; vs PEDANTIC: time ratio ± its 95% interval.")


# The cells every report shows for a check: a failed guarantee ("reproducible: NO") and a hazard that changed
# bits (under "hazards") never share a word or a column.
def label(name: str) -> str:
    """A scenario's few words for tables ("batch size"); the name itself for one not registered."""
    return REGISTRY[name].label if name in REGISTRY else name


def reproducible_cell(check: GemmCheck | None) -> str:
    """``yes``, ``NO: <guarantees that gave other bits>``, ``error: <what could not run>``, ``not checked``."""
    if check is None:
        return "-"
    if check.verdict is Reproducible.NO:
        return "NO: " + ", ".join(r.scenario for r in check.guarantee_failures)
    if check.verdict is Reproducible.ERROR:
        failed = [r.scenario for r in check.errors if r.kind is Kind.GUARANTEE]
        return "error: " + (", ".join(failed) if failed and not check.error else "no output")
    return check.verdict.value


def hazards_cell(check: GemmCheck | None) -> str:
    """The hazards that changed bits (``batch size, SM count``) or could not run; ``none``: those checked did
    not; ``-``: none was checked."""
    hazards = [r for r in check.of_kind(Kind.HAZARD) if r.compared or r.error] if check and not check.error else []
    if not hazards:
        return "-"
    words = [label(r.scenario) for r in hazards if r.changed_bits]
    words += [f"error: {r.scenario}" for r in hazards if r.error]
    return ", ".join(words) or "none"


def modes_cell(check: GemmCheck | None) -> str:
    """The modes that gave this one's bits, named without the element types the run shares."""
    group = modes_group(check)
    return "-" if group is None else ", ".join(map(name_role, group)) or "none"


def _fmt_us(value: float | None) -> str:
    if value is None or math.isnan(value):
        return "-"
    return f"{value:,.2f}" if value < 100 else f"{value:,.1f}" if value < 1e4 else f"{value:,.0f}"


def has_kernels(result: BenchResult) -> bool:
    """Whether the run recorded kernels (--kernels), for the kernel columns."""
    return any(check.kernels for _, check in _checks(result)) or any(
        arm.kernel_us is not None for report in result.shapes if report.timing for arm in report.timing.arms)


def header(kernels: bool) -> list[str]:
    return HEADER + KERNEL_HEADER if kernels else HEADER


def repro_cell(check: GemmCheck | None) -> str:
    """The repro column: the first failure and how many more (``NO: repeat +2``)."""
    cell = reproducible_cell(check)
    verdict, _, names = cell.partition(": ")
    names = names.split(", ")
    return cell if len(names) < 2 else f"{verdict}: {names[0]} +{len(names) - 1}"


def table_rows(report: ShapeReport, kernels: bool = False) -> list[list[str]]:
    """One row per configuration (A/A controls are none), named without the element types the run shares."""
    rows = []
    timing = report.timing
    role_of = {mode: check.config.role for mode, check in report.checks.items()} or (
        {a.name: a.name.role for a in timing.arms if not a.name.control} if timing else {})
    reference = timing.arm_for(MathMode.PEDANTIC) if timing else None
    roles = list(role_of.values())  # unless two share one: then their names tell them apart
    for mode, shown in zip(role_of, roles if len(set(roles)) == len(roles) else role_of):
        check = report.checks.get(mode)
        arm = timing.arm(mode) if timing else None
        tflops = timing.tflops(mode) if arm else None
        ratio = timing.ratio(mode, reference) if reference and mode != reference else None  # ± its 95% interval
        trust = "" if timing is None or timing.trusted else NOT_TRUSTED
        vs = f"{ratio.median:.3f} ±{100 * ratio.half_width:.1f}%{trust}" if ratio else "-"
        rows.append([
            shown, repro_cell(check), hazards_cell(check), modes_cell(check),
            f"{check.rel_error:.1e}" if check and not math.isnan(check.rel_error) else "-",
            _fmt_us(arm.median_us if arm else None), _fmt_us(arm.eager_median_us if arm and arm.eager_us else None),
            f"{tflops:.1f}" if tflops else "-", "" if mode == reference else vs,
        ] + ([_fmt_us(arm.kernel_us if arm else None), check.kernels.brief if check and check.kernels else "-"]
             if kernels else []))
    return rows


def fitted(header: list[str], tables: list[list[list[str]]], width: int) -> tuple[list[list[str]], list[str]]:
    """The tables' lines, in the same columns, within ``width`` (leaving out OPTIONAL columns), and those left out."""
    dropped = []
    for name in (None, *OPTIONAL):
        if name in header:
            keep = [i for i, column in enumerate(header) if column != name]
            header = [header[i] for i in keep]
            tables = [[[row[i] for i in keep] for row in rows] for rows in tables]
            dropped.append(name)
        widths = column_widths([header, *(row for rows in tables for row in rows)])
        if sum(widths) + 2 * (len(widths) - 1) <= width:
            break
    return [table([header, *rows], widths=widths) if rows else [] for rows in tables], dropped


def title(result: BenchResult) -> str:
    configs = {check.config for _, check in _checks(result)}
    types = {(c.input_dtype, c.output_dtype) for c in configs} - {("float32", "float32")}
    timed = {a.name for r in result.shapes if r.timing for a in r.timing.arms if not a.name.control}
    what = f"{plural(len(result.shapes), 'shape')} x {plural(len(configs) or len(timed), 'mode')}"
    if len(types) == 1:
        what += ", {} -> {}".format(*types.pop())
    machine = describe_machine(result.provenance, ("gpu", "sm_count", "cublas", "driver"), ("sm_count",))
    return f"cublas_det {result.version} on {machine}: {what}, {result.wall_s:.1f} s"


def render_text(result: BenchResult, *, verbose: bool = False, width: int | None = None, notes=()) -> str:
    """``notes``: lines said under the title (what a stored file of an earlier version cannot tell)."""
    width = width or report_width()
    kernels = has_kernels(result)
    lines = wrapped([title(result), *notes], width) + [""] + wrapped(summary_lines(result), width)
    details = detail_lines(result)
    if details:
        lines += [""] + wrapped(details, width, "    ")
    if any(report.timing for report in result.shapes):
        lines += [""] + wrapped(TIME_NOTE + (" " + KERNEL_NOTE if kernels else ""), width)
    lines += wrapped(LEGEND, width) + [""]
    tables, left_out = fitted(header(kernels), [table_rows(report, kernels) for report in result.shapes], width - 2)
    for report, table_lines in zip(result.shapes, tables):
        shape, timing = report.shape, report.timing
        batch = f", a batch of {shape.batch}" if shape.batch > 1 else ""
        said = [f"timed: {how_timed(timing)}"] if verbose and timing else []
        said += [f"ratios not trusted: {timing.untrusted_reason}"] if timing and not timing.trusted else []
        said += [f"error: {report.error}"] if report.error else []
        lines += wrapped(f"{shape.name}  {shape.m}x{shape.n}x{shape.k} op {shape.cublas_op}{batch}, "
                         f"{shape.flop / 1e9:.3f} GFLOP", width)
        lines += wrapped(said, width, "    ", "  ") + ["  " + line for line in table_lines]
        lines += wrapped(kernel_lines(report) if kernels else [], width, "    ", "  ") + [""]
    if left_out:
        lines += wrapped(f"Left out to fit {width} columns: {', '.join(left_out)} (a wider terminal, or "
                         "COLUMNS=120, shows them)", width) + [""]
    warnings = warnings_for(result)
    if warnings:
        lines += ["Warnings"] + wrapped(warnings, width, "    ", "  ")
    return "\n".join(lines).rstrip("\n")


def kernel_lines(report: ShapeReport) -> list[str]:
    """Every kernel each configuration's reference call ran, with its grid."""
    return [f"kernels {check.config.role}: {check.kernels.describe()}" for check in report.checks.values()
            if check.kernels]


def _checks(result: BenchResult) -> list[tuple[str, GemmCheck]]:
    return [(f"{report.shape.name} {check.config.role}", check) for report in result.shapes
            for check in report.checks.values()]


def summary_lines(result: BenchResult) -> list[str]:
    """The user's three questions answered for the whole run, a line each (before wrapping)."""
    if not result.shapes:
        return ["no shape completed"]
    checks = _checks(result)
    lines = [line for line in (reproducibility_line(checks), hazard_line(checks), cure_line(result),
                               same_bits_line(result)) if line]
    return lines + precision_lines(result) + cost_lines(result) + [verdict_line(result)]


def reproducibility_line(checks: list[tuple[str, GemmCheck]]) -> str:
    """The verdict on the guarantee scenarios, counted: never a claim about what did not run."""
    if not checks:
        return "Reproducible: not checked (no scenario ran)"
    counts = Counter(c.verdict for _, c in checks)
    ran = ", ".join(map(label, sorted({r.scenario for _, c in checks for r in c.of_kind(Kind.GUARANTEE) if r.compared},
                                      key=list(REGISTRY).index)))
    total, pairs = len(checks), plural(len(checks), "shape/mode pair")
    if counts[Reproducible.YES] == total:
        return (f"Reproducible: yes, {'all ' * (total > 1)}{pairs} gave the same bits in every guarantee checked "
                f"({ran})" + _untold(checks))
    if counts[Reproducible.NOT_CHECKED] == total:
        return f"Reproducible: not checked (no guarantee scenario ran for the {pairs})"
    order = (Reproducible.NO, Reproducible.ERROR, Reproducible.NOT_CHECKED, Reproducible.YES)
    parts = ", ".join(f"{verdict.value} for {counts[verdict]}" for verdict in order if counts[verdict])
    return f"Reproducible: {parts} of {pairs}" + (f" (guarantees checked: {ran})" if ran else "") + _untold(checks)


def _untold(checks: list[tuple[str, GemmCheck]]) -> str:
    """Guarantees that compared nothing (old files), uncounted: ``; workspace config compared nothing in 1``."""
    untold = Counter(r.scenario for _, c in checks for r in c.of_kind(Kind.GUARANTEE)
                     if r.outcome is Outcome.NOTHING_COMPARED)
    return "".join(f"; {label(name)} compared nothing in {count}" for name, count in untold.items())


def hazard_line(checks: list[tuple[str, GemmCheck]]) -> str | None:
    """Per hazard that ran: in how many pairs it changed the bits, as cuBLAS warns they may."""
    parts = []
    for name, scenario in ((n, s) for n, s in REGISTRY.items() if s.kind is Kind.HAZARD):
        results = [c.scenario(name) for _, c in checks if c.scenario(name) is not None]
        ran = [r for r in results if r.compared]
        skipped = sum(r.outcome is Outcome.NOT_APPLICABLE for r in results)
        if ran:
            part = f"{scenario.label} in {sum(r.changed_bits for r in ran)} of {plural(len(ran), 'pair')}"
            parts.append(part + (f" (not applicable to {skipped})" if skipped else ""))
        elif skipped:
            parts.append(f"{scenario.label} not applicable ({plural(skipped, 'pair')})")
    return "Hazards (bits changed, as cuBLAS warns; findings, never failures): " + ", ".join(parts) if parts else None


def cure_cost(cure) -> str:
    """What a cure costs: its graph time against the configuration it replaces (median and 95% interval)."""
    if cure.config is None:
        return "no time cost (the same GEMM)"
    if cure.ratio is None:
        return "not timed"
    median, low, high = (f"{100 * (x - 1):+.1f}%" for x in (cure.ratio.median, cure.ratio.ci_low, cure.ratio.ci_high))
    return f"{median} [{low}, {high}]"


def cure_line(result: BenchResult) -> str | None:
    """Per hazard that changed bits, its cheapest cure and what it costs where this run measured it (a setup
    cure it checked, a cure configuration it ran and timed), else the prescribe command that measures it."""
    parts, unmeasured = [], {}  # hazard label -> its prescriptions with no cure measured here
    for name, scenario in ((n, s) for n, s in REGISTRY.items() if s.kind is Kind.HAZARD):
        found = [Prescription(report.shape, check.config, name, cures_in_run(check, name, report.checks.values(),
                                                                             report.timing))
                 for report in result.shapes for check in report.checks.values()
                 if not check.error and check.scenario(name) and check.scenario(name).changed_bits]
        measured: dict = {}  # the cheapest cure's label -> the cures of that label
        for p in found:
            if p.best and (p.best.config is None or p.best.ratio):
                measured.setdefault(p.best.label, []).append(p.best)
            else:
                unmeasured.setdefault(scenario.label, []).append(p)
        for cure, cures in measured.items():
            ratios = [c.ratio.median for c in cures if c.ratio]
            cost = _change(min(ratios), max(ratios)) if ratios else cure_cost(cures[0])
            parts.append(f"{scenario.label}: {cure} (verified here for {len(cures)} of "
                         f"{plural(len(found), 'pair')}), {cost}")
    if unmeasured:
        command = prescribe_command([p for found in unmeasured.values() for p in found])
        parts.append(f"{', '.join(unmeasured)}: not measured in this run; measured by `{command}`")
    return "Cheapest cures: " + "; ".join(parts) if parts else None


def prescribe_command(prescriptions) -> str:
    """The prescribe command that checks the GEMMs of ``prescriptions``: their presets or shapes, and modes,
    each option left out where it is prescribe's default."""
    shapes = list({p.shape.name: p.shape for p in prescriptions}.values())
    configs = list({p.config.name: p.config for p in prescriptions}.values())
    presets = list(dict.fromkeys(s.preset for s in shapes if s.preset))
    custom = list(dict.fromkeys(s.spec for s in shapes if not s.preset))
    tokens = {s.tokens for s in shapes if s.preset and s.preset != "trunk"} - {DEFAULT_TOKENS}
    dtypes = {c.input_dtype for c in configs} - {"float32"}
    modes = list(dict.fromkeys(c.role.lower() for c in configs))
    default_modes = HALF_DEFAULT_MODES if dtypes else DEFAULT_MODES
    shape_words = (["--preset", *presets] if presets else []) + (["--shape", *custom] if custom else [])
    if not custom and set(presets) == set(DEFAULT_PRESETS):
        shape_words = []
    words = ["cublas-det prescribe", *shape_words, *(f"--tokens {t}" for t in tokens), *(f"--dtype {d}" for d in dtypes),
             *(["--modes", *modes] if set(modes) != set(default_modes) else [])]
    return " ".join(words)


def same_bits_line(result: BenchResult) -> str | None:
    """Which configurations gave PEDANTIC's bits, counted over the shapes the modes scenario compared."""
    counts, shapes = Counter(), 0
    for report in result.shapes:
        pedantic = report.check_for(MathMode.PEDANTIC)
        group = modes_group(pedantic)
        if group is None:
            continue
        shapes += 1
        for mode, check in report.checks.items():
            if mode != pedantic.mode_name:
                counts[check.config.role] += mode in group
    return "Same bits as PEDANTIC: " + ", ".join(f"{name} on {count} of {plural(shapes, 'shape')}"
                                                 for name, count in counts.items()) if counts else None


def precision_lines(result: BenchResult) -> list[str]:
    """In half precision: which cells of the math-mode x compute-type matrix gave PEDANTIC's bits."""
    same, changed, shapes, dtype = Counter(), Counter(), 0, ""
    for report in result.shapes:
        check = next(iter(report.checks.values()), None)
        modes = check.scenario("modes") if check else None
        if modes is None or modes.error or "all_groups" not in modes.extra or check.config.input_dtype == "float32":
            continue
        shapes += 1
        dtype = check.config.input_dtype
        base = dataclasses.replace(check.config, math_mode=MathMode.PEDANTIC, compute_type=ComputeType.COMPUTE_32F,
                                   disallow_reduced_precision_reduction=False).name + "/COMPUTE_32F"
        group = next((g for g in modes.extra["all_groups"] if base in g), [base])
        # the cells cuBLASLt has an algorithm for, named without what the run's cells share and COMPUTE_32F
        for cell in (cell for cell, value in modes.extra["matrix"].items() if value.get("digest") is not None):
            shown = "/".join(p for p in name_role(cell).split("/") if p != "COMPUTE_32F")
            (same if cell in group else changed)[shown] += 1
    if not shapes:
        return []
    always = [name for name, count in same.items() if count == shapes and name not in changed]
    line = f"Same bits in {dtype}: {', '.join(always)} on {'all ' * (shapes > 1)}{plural(shapes, 'shape')}"
    if changed:
        line += "; " + ", ".join(f"{name} changed them ({count} of {shapes})" for name, count in changed.items())
    return [line]


def _change(low: float, high: float) -> str:
    """A range of time ratios in words: ``1.20-1.66x faster``, ``20-60x the time``, ``+0.3% to +0.8%``."""
    if 0.9 < low and high < 1.1:
        a, b = f"{100 * (low - 1):+.1f}%", f"{100 * (high - 1):+.1f}%"
        return a if a == b else f"{a} to {b}"
    a, b = (f"{1 / high:.2f}", f"{1 / low:.2f}") if high < 1 else (f"{low:.2f}", f"{high:.2f}")
    return (a if a == b else f"{a}-{b}") + ("x faster" if high < 1 else "x the time")


def cost_lines(result: BenchResult) -> list[str]:
    """What determinism costs per preset: PEDANTIC vs DEFAULT, the rest vs PEDANTIC; an interval holding 1: none."""
    pairs: dict = {}  # (PEDANTIC vs DEFAULT?, numerator role, denominator role) -> [(report, ratio)]
    for report in (report for report in result.shapes if report.timing):
        pedantic, default = report.timing.arm_for(MathMode.PEDANTIC), report.timing.arm_for(MathMode.DEFAULT)
        roles = {arm.name: arm.name.role for arm in report.timing.arms}
        for r in report.timing.ratios:
            cost = (r.numerator, r.denominator) == (pedantic, default)
            if (cost or r.denominator == pedantic and r.numerator not in (default, pedantic)) \
                    and not is_control(r.numerator):
                pairs.setdefault((cost, roles[r.numerator], roles[r.denominator]), []).append((report, r))
    lines = []
    for (cost, numerator, denominator), found in sorted(pairs.items(), key=lambda item: not item[0][0]):
        flat = [r for _, r in found if r.ci_low <= 1 <= r.ci_high]
        by_preset: dict = {}
        for report, r in found:
            if not r.ci_low <= 1 <= r.ci_high:
                by_preset.setdefault(report.shape.preset or "custom shapes", []).append(r.median)
        parts = []
        if flat:
            widest = max(max(1 - r.ci_low, r.ci_high - 1) for r in flat)
            what = "cost" if cost else "difference"
            parts.append(f"no measurable {what} on {len(flat)} of {plural(len(found), 'shape')} "
                         f"(within ±{100 * widest:.1f}%)")
        parts += [f"{_change(min(v), max(v))} ({preset}" + (f", {plural(len(v), 'shape')})" if flat else ")")
                  for preset, v in by_preset.items()]
        lines.append(f"Time, {numerator} vs {denominator}: " + "; ".join(parts))
    return lines


def verdict_line(result: BenchResult) -> str:
    checks = _checks(result)
    failed = [where for where, c in checks if c.guarantee_failures]
    errors = [where for where, c in checks if not c.guarantee_failures and check_failures(c)]
    errors += [r.shape.name for r in result.shapes if r.error]
    if not failed and not errors:
        held = any(c.verdict is Reproducible.YES for _, c in checks)
        return "Verdict: pass, " + ("every guarantee held" if held else "no guarantee was checked" if checks
                                    else "nothing failed") + f" (exit {ExitCode.OK:d})"
    parts = [f"{plural(len(failed), 'pair')} gave other bits under a guarantee"] if failed else []
    parts += [f"{len(errors)} could not be checked or timed"] if errors else []
    return f"Verdict: FAIL (exit {ExitCode.FINDING:d}): {'; '.join(parts)}; details below"


def detail_lines(result: BenchResult) -> list[str]:
    """What the summary counts, named: guarantee failures, scenarios that could not run, hazard examples."""
    checks = _checks(result)
    lines = []
    failures = [(where, r) for where, c in checks for r in c.guarantee_failures]
    if failures:
        lines.append("FAILED (documented as reproducible, yet gave other bits): "
                     + "; ".join(f"{where}: {r.scenario}" for where, r in failures[:5]))
        lines += [f"  {where}: {r}" + (f" ({r.detail})" if r.detail else "") for where, r in failures[:5]]
    errors = [(where, r) for where, c in checks for r in c.errors]
    if errors:
        lines.append(f"Could not run ({plural(len(errors), 'scenario run')}): "
                     + "; ".join(f"{where} {r.scenario}: {r.error}" for where, r in errors[:3]))
    for name, scenario in ((n, s) for n, s in REGISTRY.items() if s.kind is Kind.HAZARD):
        changed = [(where, c.scenario(name)) for where, c in checks
                   if c.scenario(name) is not None and c.scenario(name).changed_bits]
        if changed:
            shapes = list(dict.fromkeys(where.rsplit(" ", 1)[0] for where, _ in changed))
            lines.append(f"{scenario.label}: {plural(len(changed), 'pair')}, e.g. {', '.join(shapes[:3])}")
            lines += [f"  why (kernels): {where}, {key}: {change}" for where, r in changed
                      for key, change in list(r.extra.get("kernel_changes", {}).items())[:1]][:3]
    return lines


def warnings_for(result: BenchResult) -> list[str]:
    notes = []
    env = result.provenance.get("env", {})
    if env.get("CUPY_TF32") == "1":
        notes.append("CUPY_TF32=1 is set: cupy.matmul uses TF32 whatever the math mode (this tool's GEMMs do not)")
    if env.get("NVIDIA_TF32_OVERRIDE") == "0":
        notes.append("NVIDIA_TF32_OVERRIDE=0 is set: TF32 requests run in fp32")
    for report in result.shapes:
        check = report.check_for(MathMode.TF32)
        if check and not math.isnan(check.rel_error) and check.rel_error < 1e-5:
            notes.append(f"{report.shape.name}: TF32 was requested but not engaged (rel. error "
                         f"{check.rel_error:.1e} looks like fp32)")
        notes += [f"{report.shape.name} {arm.name}: noisy timing, IQR {100 * arm.rel_iqr:.0f}% of the median"
                  for arm in (report.timing.arms if report.timing else ()) if arm.rel_iqr > NOISY_REL_IQR]
    return notes + timing_warnings(result)
