"""A stored run read by this version's scenarios: the :class:`BenchResult` a run file holds (read by the store,
each scenario record as the registry reads it), and what a file of an earlier version cannot tell."""

from __future__ import annotations

import dataclasses
import math

from ..base.errors import InputFileError
from ..base.words import plural
from ..core.shapes import GemmShape
from ..results.bench import BenchResult
from ..results.check import ScenarioResult
from ..store.results import read_result
from ..store.run import NO_IDENTITY, StoredRun
from .scenarios import REGISTRY
from .scenarios.batch import not_applicable_reason

UNTOLD_WORKSPACE_CONFIG = ("not told: the checker compared the worker's streams with the worker's own first output, "
                           "whose operands could still be in flight")


def untold_workspace_config(raw: dict) -> bool:
    """A workspace-config difference recorded before the first output was checked against this process's
    bits: it may be in that output, not in the streams."""
    return (raw["scenario"] == "workspace-config" and bool(raw.get("differing_runs")) and not raw.get("error")
            and "reference_digest" not in (raw.get("extra") or {}))


def untold_nan(raw: dict) -> bool:
    """A difference with a NaN recorded before NaN pairs were counted apart: its ULP distance and location
    may be a NaN's bit pattern's, not a number's."""
    values = (raw.get("max_abs_diff"), raw.get("reference_value"), raw.get("actual_value"))
    return (bool(raw.get("mismatched_elements")) and "nan_mismatches" not in raw
            and any(isinstance(v, float) and math.isnan(v) for v in values))


def untold_batch(raw: dict, shape: GemmShape) -> bool:
    """batch-invariance run by an earlier version on a dW GEMM, where it does not apply."""
    return (raw["scenario"] == "batch-invariance" and not raw.get("not_applicable") and not raw.get("error")
            and shape.gemm_pass == "dW")


def bench_result(run: StoredRun) -> BenchResult:
    """The :class:`BenchResult` a stored run was written from; a value this version cannot read: one line naming it."""
    return read_result(run, read_scenario)


def read_scenario(raw: dict, shape: GemmShape) -> ScenarioResult:
    """A stored scenario record as this version reads it: its kind from the registry where a 0.1 file left it out,
    and what an earlier version could not tell (:func:`untold_workspace_config`, :func:`untold_batch`) undone."""
    if raw["scenario"] not in REGISTRY:  # the reports lay scenarios out in the registry's order
        raise ValueError(f"scenario {raw['scenario']!r} is not one this version knows ({', '.join(REGISTRY)})")
    result = ScenarioResult.from_dict({**raw, "kind": raw.get("kind") or REGISTRY[raw["scenario"]].kind})
    if untold_workspace_config(raw):
        return dataclasses.replace(result, runs=0, differing_runs=0, detail=f"{UNTOLD_WORKSPACE_CONFIG}; the file "
                                   f"says {raw['differing_runs']}/{raw['runs']} runs differ")
    if untold_batch(raw, shape):
        return dataclasses.replace(result, not_applicable=not_applicable_reason(shape))
    return result


def old_file_note(run: StoredRun) -> str | None:
    """``note: run.json was written by cublas_det 0.1.0, which cannot tell: ...``, or None for a file of this
    version."""
    limits = [f"the inputs it ran on ({NO_IDENTITY} recorded)"] if run.legacy else []
    untold, batch, nan = [], 0, 0
    for entry in run.entries:
        shape = GemmShape.from_dict(entry.extra_info["shape"]) if entry.extra_info.get("scenarios") else None
        for raw in entry.extra_info.get("scenarios") or ():
            untold += [entry.name] if untold_workspace_config(raw) else []
            batch += untold_batch(raw, shape)
            nan += untold_nan(raw)
    if untold:
        named = ", ".join(untold[:3]) + (", ..." if len(untold) > 3 else "")
        limits.append(f"workspace config in {named} (a difference from the worker's own first output, whose operands "
                      "could still be in flight: not counted)")
    if batch:
        limits.append(f"batch size in {plural(batch, 'dW result')} (run there, though their batch is the reduction "
                      "axis: not counted)")
    if nan:
        limits.append(f"NaN in {plural(nan, 'difference')} (ranked there by a NaN's bit pattern: its ULP distance "
                      "and location may not be a number's)")
    return (f"note: {run.source} was written by cublas_det {run.version}, which cannot tell: {'; '.join(limits)}"
            if limits else None)


def stored_ratios(run: StoredRun, numerator: str, denominator: str) -> dict:
    """{shape name: (Ratio, setups)} of a stored run; :class:`InputFileError` if none is, or one is no time ratio."""
    found = {}
    for report in bench_result(run).shapes:
        timing = report.timing
        for ratio in (timing.ratios if timing else ()):
            if (ratio.numerator, ratio.denominator) == (numerator, denominator):
                if ratio.median <= 0:
                    raise InputFileError(f"{run.source}: {report.shape.name}: a {numerator}/{denominator} ratio of "
                                         f"{ratio.median} cannot be a time ratio")
                found[report.shape.name] = (ratio, int(timing.options.get("setups") or 1))
    if not found:
        raise InputFileError(f"{run.source}: no {numerator}/{denominator} ratio (a --no-timing run, or other modes)")
    return found
