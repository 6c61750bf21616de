"""A benchmark's results as a run file (:func:`to_json`), and a run file back as the :class:`BenchResult` it was
written from (:func:`read_result`); the schema is :mod:`.run`'s. What a stored scenario record means to this
version (its kind in a 0.1 file, what an earlier version could not tell) is the scenarios' knowledge, so the
reader is handed it (``read_scenario``, :mod:`cublas_det.check.stored`'s)."""

from __future__ import annotations

import dataclasses
import functools
import os
import subprocess
from typing import Callable

from ..base.errors import InputFileError
from ..bindings.cublas import MathMode
from ..core.config import GemmConfig
from ..core.shapes import GemmShape, catalogue_entry, token_counts
from ..results.bench import BenchResult, ShapeReport
from ..results.check import CallKernels, GemmCheck, ScenarioResult, check_failures, modes_group
from ..results.stats import Ratio
from ..results.timing import Arm, ArmTiming, Discards, ShapeTiming
from .run import TIMER, Entry, StoredRun, benchmark_entry, identity, micros, seconds, stats

# How a reader of scenario records turns one (its raw record, its shape) into the result this version reads.
ReadScenario = Callable[[dict, GemmShape], ScenarioResult]


def _git(directory: str, *args: str) -> str:
    return subprocess.run(["git", "-C", directory, *args], capture_output=True, text=True, check=True,
                          timeout=10).stdout.strip()


@functools.cache
def commit_info() -> dict:
    """pytest-benchmark's commit fields of the checkout holding this package; id ``unversioned`` outside git."""
    directory = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    info = {"id": "unversioned", "time": None, "author_time": None, "dirty": False, "project": "cublas_det",
            "branch": "(unknown)"}
    try:
        # Only a checkout of this project: a wheel installed in some other project's tree is unversioned.
        if os.path.realpath(_git(directory, "rev-parse", "--show-toplevel")) != os.path.realpath(directory):
            return info
        commit, committed, authored = _git(directory, "show", "-s", "--pretty=format:%H %cI %aI").split()
        branch = _git(directory, "rev-parse", "--abbrev-ref", "HEAD")
        dirty = bool(_git(directory, "status", "--porcelain", "--untracked-files=no"))
    except (OSError, subprocess.SubprocessError, ValueError):
        return info
    return {**info, "id": commit, "time": committed, "author_time": authored, "dirty": dirty,
            "branch": "(detached head)" if branch == "HEAD" else branch}


def to_json(result: BenchResult, summary: list[str], warnings: list[str]) -> dict:
    """The run file of ``result``: an entry per shape and configuration, the run's facts under ``cublas_det``;
    ``summary`` and ``warnings``: the report's lines, stored as a reader of the file without this package sees them."""
    benchmarks = []
    for report in result.shapes:
        arms = report.timing.arms if report.timing else ()
        for mode in list(report.checks) + [a.name for a in arms if a.name not in report.checks]:
            check = report.checks.get(mode)
            arm = report.timing.arm(mode) if report.timing else None
            graph = stats(arm.graph_us, report.timing.calls_per_batch) if arm else None
            benchmarks.append(benchmark_entry(report.shape, mode, graph, {
                "shape": report.shape.to_dict(),
                "identity": identity(report.shape, mode, check.seed if check else result.seed,
                                     check.input_digests if check else None,
                                     result.provenance.get("numpy_version")),
                **check_record(check), **timing_record(report.timing, mode),
                "error": report.error or (check.error if check else None),
            }, timing_options(report.timing) if arm else None))
    ratios = {r.shape.name: [x.to_dict() for x in r.timing.ratios] for r in result.shapes if r.timing}
    timing = {r.shape.name: {k: v for k, v in r.timing.to_dict().items() if k not in ("arms", "ratios")}
              for r in result.shapes if r.timing}
    return {"machine_info": result.provenance, "commit_info": commit_info(), "benchmarks": benchmarks,
            "datetime": result.started, "version": result.version, "cublas_det": {
                "wall_s": result.wall_s, "phases_s": {name: round(s, 3) for name, s in result.phases.items()},
                "interrupted": result.interrupted, "ratios": ratios, "timing": timing,
                "summary": summary, "warnings": warnings}}


def check_record(check: GemmCheck | None) -> dict:
    """A check as its entry's ``extra_info`` holds it (a timed-only configuration's when ``check`` is None)."""
    if check is None:
        return {"mode_source": None, "config": None, "digest": None, "rel_error": None, "reproducible": None,
                "failures": [], "findings": [], "same_bits_as": None, "scenarios": []}
    return {"mode_source": check.mode_source, "config": check.config.to_dict(), "digest": check.digest,
            "rel_error": check.rel_error, "reproducible": check.verdict.value, "failures": check_failures(check),
            "findings": [r.scenario for r in check.findings], "same_bits_as": modes_group(check),
            "scenarios": [r.to_dict() for r in check.scenarios],
            **({"kernels": check.kernels.to_dict()} if check.kernels else {})}


def timing_record(timing, mode: str) -> dict:
    """The timing of configuration ``mode`` as ``extra_info`` holds it (nulls where not timed)."""
    arm = timing.arm(mode) if timing else None
    pedantic = timing.arm_for(MathMode.PEDANTIC) if timing else None
    ratio = timing.ratio(mode, pedantic) if pedantic else None
    record = {"eager_stats": stats(arm.eager_us, timing.calls_per_batch) if arm else None,
              "calls_per_batch": timing.calls_per_batch if timing else None,
              "buffer_sets": timing.buffer_sets if timing else None,
              "timing_elapsed_s": timing.elapsed_s if timing else None,
              "ratio_to_pedantic": ratio.to_dict() if ratio else None}
    if arm is None:
        return record
    low, high = arm.median_ci_us
    kernels = {"kernel_time_s": seconds(arm.kernel_us), "timed_kernels": arm.kernels} if arm.kernel_us else {}
    setups = {"setups": list(arm.setups)} if arm.setups else {}  # of each sample in stats.data, in order
    return {**record, **kernels, **setups, "median_ci_s": [seconds(low), seconds(high)],
            "sm_clock_mhz": arm.median_clock_mhz, "stop_reason": timing.stop_reason, "timing_trusted": timing.trusted,
            "untrusted_reason": timing.untrusted_reason, "noise_floor": timing.noise_floor}


def timing_options(timing) -> dict:
    """pytest-benchmark's ``options`` of a timed entry: how its samples were taken."""
    return {"timer": TIMER, "disable_gc": False, "min_time": 1e-3, "warmup": True,
            "min_rounds": timing.options.get("min_rounds"), "max_rounds": timing.options.get("max_rounds"),
            "max_time": timing.options.get("budget_s")}


def read_result(run: StoredRun, read_scenario: ReadScenario) -> BenchResult:
    """The :class:`BenchResult` a stored run was written from; a value this version cannot read: one line naming it."""
    if run.sweep:
        raise InputFileError(f"{run.source}: a --devices sweep has no per-mode tables; give it to compare")
    groups: dict[str, list[Entry]] = {}
    for entry in run.entries:
        groups.setdefault(entry.shape_name, []).append(entry)
    info = run.data.get("cublas_det") or {}
    ratios, timings = info.get("ratios") or {}, info.get("timing") or {}
    reports = tuple(_shape_report(name, entries, run, ratios.get(name) or [], timings.get(name) or {}, read_scenario)
                    for name, entries in groups.items())
    seeds = {(e.identity or {}).get("seed") for e in run.entries} - {None}
    return BenchResult(reports, run.machine_info, run.datetime, float(info.get("wall_s") or 0.0), run.version,
                       bool(info.get("interrupted")), seeds.pop() if len(seeds) == 1 else None)


def _read_back(where: str, read, data):
    """``read(data)``, or one line naming ``where`` when the stored value is not one this version reads."""
    try:
        return read(data)
    except KeyError as err:
        raise InputFileError(f"{where}: cannot be read back (missing or unknown {err})") from None
    except (TypeError, ValueError) as err:
        raise InputFileError(f"{where}: cannot be read back ({err})") from None


def _shape_report(name: str, entries: list[Entry], run: StoredRun, ratios: list, how: dict,
                  read_scenario: ReadScenario) -> ShapeReport:
    """``how``: the file's record of how the shape was timed (stop reason, discarded rounds, clock floor, options)."""
    where = f"{entries[0].where}.extra_info.shape"
    shape = _catalogue_shape(_read_back(where, GemmShape.from_dict, entries[0].extra_info["shape"]))
    checks = {e.config: stored_check(shape, e, run, read_scenario) for e in entries if e.extra_info.get("scenarios")}
    timed = [e for e in entries if e.stats and e.stats.get("data")]
    for e in timed:
        if not (e.extra_info.get("eager_stats") or {}).get("data"):
            raise InputFileError(f"{e.where}.extra_info.eager_stats.data: missing; a timed entry has its eager times "
                                 "too")
    known = {mode: check.config for mode, check in checks.items()}
    arms = tuple(ArmTiming(_read_back(f"{e.where}.name", lambda n: Arm.read(n, known), e.config),
                           tuple(map(micros, e.stats["data"])), tuple(map(micros, e.extra_info["eager_stats"]["data"])),
                           # the file keeps the median SM clock of an arm, not each batch's
                           (e.extra_info["sm_clock_mhz"],) if e.extra_info.get("sm_clock_mhz") else (),
                           kernel_us=e.extra_info.get("kernel_time_s") and micros(e.extra_info["kernel_time_s"]),
                           kernels=e.extra_info.get("timed_kernels") or "",
                           setups=tuple(e.extra_info.get("setups") or ())) for e in timed)
    timing = None
    if arms:
        info = entries[0].extra_info
        timing = ShapeTiming(name, shape.flop, int(info.get("calls_per_batch") or 0),
                             int(info.get("buffer_sets") or 1), len(arms[0].graph_us), arms,
                             tuple(_read_back(f"{run.source}: cublas_det.ratios[{name!r}]", Ratio.from_dict, r)
                                   for r in ratios),
                             float(info.get("timing_elapsed_s") or 0.0), how.get("stop_reason") or "",
                             Discards.from_dict(how.get("discards") or {}), how.get("clock_floor_mhz"),
                             options=how.get("options") or {})
    errors = {e.extra_info.get("error") for e in entries} - {None}
    return ShapeReport(shape, checks, timing, "; ".join(sorted(errors)) or None)


def stored_check(shape: GemmShape, entry: Entry, run: StoredRun, read_scenario: ReadScenario) -> GemmCheck:
    """The check an entry's :func:`check_record` holds."""
    info = entry.extra_info
    where = f"{entry.where}.extra_info"
    if info.get("config"):
        config = _read_back(f"{where}.config", GemmConfig.from_dict, info["config"])
    else:
        config = _read_back(f"{where}: configuration", GemmConfig.parse, entry.config)
    results = tuple(_read_back(f"{where}.scenarios[{i}]", lambda r: read_scenario(r, shape), raw)
                    for i, raw in enumerate(info["scenarios"]))
    rel_error = info.get("rel_error")
    identity = entry.identity or {}
    # A check whose GEMM could not be computed reads "error", even when only hazards were asked.
    error = info.get("error") if not info.get("digest") else None
    return GemmCheck(shape, config, info.get("mode_source") or "argument", int(identity.get("seed") or 0),
                     info.get("digest") or "", float("nan") if rel_error is None else float(rel_error), results,
                     run.machine_info, error=error, input_digests=identity.get("inputs") or {},
                     kernels=_read_back(f"{where}.kernels", CallKernels.from_dict, info["kernels"])
                     if info.get("kernels") else None)


def _catalogue_shape(shape: GemmShape) -> GemmShape:
    """The catalogue's shape for a 0.1 file (no preset recorded) whose name and dimensions match; else as stored."""
    if shape.preset or not shape.gemm_pass:
        return shape
    stored = (shape.name, shape.m, shape.n, shape.k, shape.trans_a, shape.trans_b)
    found = catalogue_entry(lambda s: (s.name, s.m, s.n, s.k, s.trans_a, s.trans_b) == stored,
                            token_counts(shape.m, shape.k, shape.gemm_pass))
    return dataclasses.replace(found, batch=shape.batch) if found else shape


def sweep_to_json(runs: list, found: list, provenance: dict, started: str, wall_s: float, version: str,
                  summary: list[str], seed: int | None = None) -> dict:
    """A device sweep's run file (``runs``: check.devices' DeviceRun; ``found``: its Agreement per shape and
    mode): pytest-benchmark's layout (no timing stats), with every device's digest per shape and mode, and the
    report's ``summary`` as given."""
    benchmarks = [benchmark_entry(a.shape, a.mode_name, None, {
        "shape": a.shape.to_dict(),
        "identity": identity(a.shape, a.mode_name, seed, a.input_digests, provenance.get("numpy_version")),
        "digest": a.majority, "device_digests": {str(d): digest for d, digest in sorted(a.digests.items())},
        "device_errors": {str(d): error for d, error in sorted(a.errors.items())},
        "devices_agree": a.agree, "outliers": a.outliers, "config": a.config.to_dict(),
        "scenario_failures": {str(d): s for d, s in sorted(a.scenario_failures.items())},
        "findings": {str(d): s for d, s in sorted(a.findings.items())},
    }) for a in found]
    devices = [{"device_id": run.device_id, "provenance": run.provenance, "error": run.error,
                "elapsed_s": run.elapsed_s} for run in runs]
    return {"machine_info": {**provenance, "devices": devices}, "commit_info": {}, "benchmarks": benchmarks,
            "datetime": started, "version": version,
            "cublas_det": {"sweep": True, "wall_s": wall_s, "summary": summary}}
