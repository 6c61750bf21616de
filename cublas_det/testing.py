"""``assert_gemm_reproducible`` and ``assert_runs_identical``: judge a GEMM or two runs and fail with the facts."""

from __future__ import annotations

import os

from .bits.streams import lookup_dtype
from .check import DEFAULT_SCENARIOS, check_gemm
from .results.check import GemmCheck, Kind, Reproducible, ScenarioResult
from .rundiff.diff import LeafStatus, diff_runs, diverging
from .rundiff.diff import describe_leaf_type as described
from .rundiff.layouts import open_run
from .base.words import percent

__all__ = ["assert_gemm_reproducible", "assert_runs_identical", "format_failure", "format_run_divergence"]


def assert_gemm_reproducible(shape_or_check, mode=None, *, scenarios=DEFAULT_SCENARIOS, repeats: int = 20,
                             seed: int = 0, gemm_fn=None, fail_on_hazards: bool = False) -> GemmCheck:
    """Assert that a GEMM's bits (``shape_or_check``: a shape, a spec or a finished :class:`GemmCheck`) repeat in
    every guarantee scenario, and with ``fail_on_hazards`` every hazard one; return the check; else AssertionError
    with the facts (also when a scenario could not run, or nothing was asserted)."""
    if isinstance(shape_or_check, GemmCheck):
        check = shape_or_check
    else:
        check = check_gemm(shape_or_check, mode, repeats=repeats, scenarios=scenarios, seed=seed, gemm_fn=gemm_fn)
    if _failing(check, fail_on_hazards) or _nothing_judged(check, fail_on_hazards):
        raise AssertionError(format_failure(check, fail_on_hazards))
    return check


def _failing(check: GemmCheck, fail_on_hazards: bool) -> tuple[ScenarioResult, ...]:
    return check.guarantee_failures + (check.findings if fail_on_hazards else ()) + check.errors


def _nothing_judged(check: GemmCheck, fail_on_hazards: bool) -> bool:
    """No guarantee ran and no hazard is judged instead: asserting would claim what did not run."""
    hazards_ran = any(r.compared for r in check.of_kind(Kind.HAZARD))
    return check.verdict is Reproducible.NOT_CHECKED and not (fail_on_hazards and hazards_ran)


def format_failure(check: GemmCheck, fail_on_hazards: bool = False) -> str:
    where = f"GEMM {check.shape}"
    math = f"in {check.mode_name} math"
    def names(results) -> str:
        return ", ".join(r.scenario for r in results)
    if check.guarantee_failures:
        header = f"{where} is not bit-for-bit reproducible {math} ({names(check.guarantee_failures)})."
    elif fail_on_hazards and check.findings:
        header = (f"{where} changed bits under hazard scenarios {math} ({names(check.findings)}), and "
                  "fail_on_hazards=True.")
    elif check.errors:
        header = f"{where} could not be fully checked {math} ({names(check.errors)} could not run)."
    else:
        header = (f"{where}: no guarantee scenario was checked {math} (scenarios: {names(check.scenarios) or 'none'}), "
                  "so nothing can be asserted; add 'repeat' or 'fresh-handle', or pass fail_on_hazards=True.")
    lines = [header, ""]
    for result in _failing(check, fail_on_hazards):
        lines += _scenario_lines(result)
    lines.append(f"Math mode: {check.mode_name} (from {check.mode_source}); seed {check.seed}; "
                 f"reference digest {check.digest[:16] or 'none'}")
    return "\n".join(lines).rstrip()


def _scenario_lines(result: ScenarioResult) -> list[str]:
    lines = [f"Scenario: {result.scenario} ({result.kind.value})" + (f": {result.detail}" if result.detail else "")]
    if result.error:
        return lines + [f"Could not run: {result.error}", ""]
    lines.append(f"Runs differing from the first: {result.differing_runs} / {result.runs}")
    if result.total_elements:
        share = percent(result.mismatched_elements, result.total_elements)
        lines.append(f"Mismatched elements: {result.mismatched_elements} / {result.total_elements} ({share})"
                     " in the worst run")
    if result.index is not None:
        diff = "none" if result.max_abs_diff is None else f"{result.max_abs_diff:.3g}"
        nans = f"; {result.nan_mismatches} with NaN (no ULP distance)" if result.nan_mismatches else ""
        lines.append(f"Greatest absolute difference: {diff}; greatest ULP distance: "
                     f"{'none' if result.max_ulp is None else result.max_ulp} at index {result.index} "
                     f"(expected {result.reference_value!r}, got {result.actual_value!r}){nans}")
    return lines + [""]


def assert_runs_identical(dir_a, dir_b, *, dtype: str = "float32", order=None, all_steps: bool = False):
    """Assert that two runs (any layout ``python -m cublas_det.diff`` reads; ``dtype``: of raw ``.bin`` files) have
    equal bits in every leaf of every step; return the RunDiff; else AssertionError with the first divergence
    and the facts (also when nothing was compared or one run ends first)."""
    run_a, run_b = (open_run(os.fspath(run), raw_dtype=dtype) for run in (dir_a, dir_b))
    comparison = diff_runs(run_a, run_b, order=list(order) if order else None, all_steps=all_steps)
    runs = f"\n\nRun A: {comparison.run_a}\nRun B: {comparison.run_b}"
    if comparison.nothing_compared:
        raise AssertionError(f"Runs were not compared: {comparison.verdict()}.{runs}")
    if not comparison.identical:
        raise AssertionError(format_run_divergence(comparison))
    if comparison.ended:
        raise AssertionError(f"Runs are identical only as far as {comparison.ended} goes: {comparison.ending()}.{runs}")
    return comparison


def format_run_divergence(comparison) -> str:
    lines = [f"Runs are not bit-for-bit identical: {comparison.verdict()}.", "",
             f"Run A: {comparison.run_a}", f"Run B: {comparison.run_b}", ""]
    for step in comparison.steps:
        if step.equal:
            continue
        lines.append(f"Step {step.step}: {diverging(len(step.diverged), len(step.leaves))}")
        lines += [f"  {_run_leaf_facts(leaf)}" for leaf in step.diverged]
        lines.append("")
    if comparison.not_compared:
        lines.append(f"Later steps not compared: {len(comparison.not_compared)} (all_steps=True compares them)")
    return "\n".join(lines).rstrip()


def _run_leaf_facts(leaf) -> str:
    if leaf.status is LeafStatus.MISSING_IN_A:
        return f"Leaf {leaf.leaf}: missing in A (B has {described(leaf.dtype_b, leaf.shape_b)})"
    if leaf.status is LeafStatus.MISSING_IN_B:
        return f"Leaf {leaf.leaf}: missing in B (A has {described(leaf.dtype_a, leaf.shape_a)})"
    if leaf.status is not LeafStatus.DIVERGE:
        return (f"Leaf {leaf.leaf}: {leaf.status.value}: A {described(leaf.dtype_a, leaf.shape_a)}, "
                f"B {described(leaf.dtype_b, leaf.shape_b)}")
    if leaf.stats is None:
        return f"Leaf {leaf.leaf}: digests differ (recorded as a digest: no element facts)"
    stats, dtype = leaf.stats, lookup_dtype(leaf.dtype_a)
    text = (f"Leaf {leaf.leaf}: {stats.mismatched_elements} / {stats.total_elements} elements differ "
            f"({percent(stats.mismatched_elements, stats.total_elements)})")
    if stats.only_signed_zeros:
        text += "; signed zero only (+0 against -0, 0 ULP)"
    elif dtype.is_float:
        ulp = "nan" if stats.nan_mismatches else str(stats.max_ulp)
        text += f"; greatest ULP distance {ulp}"
    if stats.max_abs_diff is not None and not stats.only_signed_zeros:
        text += f"; greatest absolute difference {stats.max_abs_diff:.3g}"
    if stats.nan_mismatches:
        text += f"; {stats.nan_mismatches} with NaN"
    index = ", ".join(map(str, stats.index))
    return (text + f"; worst at index [{index}] (A {dtype.format_value(stats.reference_value)}, "
            f"B {dtype.format_value(stats.actual_value)})")
