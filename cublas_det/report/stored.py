"""A benchmark run read back from its ``--json`` file, as the results it was rendered from.

The inverse of :func:`cublas_det.report.json_file.to_json`, so that a stored run can be rendered
again (``python -m cublas_det.report``). Files of cublas_det 0.1 carry no scenario kinds: the
registry supplies them.
"""

from __future__ import annotations

from ..check.results import BenchResult, GemmCheck, ScenarioResult, ShapeReport
from ..check.scenarios import REGISTRY
from ..config import GemmConfig
from ..errors import InputFileError
from ..kernels.signature import KernelSignature
from ..runfile import Entry, Run
from ..shapes import GemmShape
from ..timing import ArmTiming, Ratio, ShapeTiming
from ..timing.results import Discards


def bench_result(run: Run) -> BenchResult:
    """The :class:`BenchResult` a stored benchmark run was written from."""
    if run.sweep:
        raise InputFileError(f"{run.source}: a --devices sweep has no per-mode tables to render; compare it with "
                             "python -m cublas_det.compare")
    groups: dict[str, list[Entry]] = {}
    for entry in run.entries:
        groups.setdefault(entry.shape_name, []).append(entry)
    info = run.data.get("cublas_det") or {}
    ratios = info.get("ratios") or {}
    try:
        timings = info.get("timing") or {}
        reports = tuple(_shape_report(name, entries, run, ratios.get(name) or [], timings.get(name) or {})
                        for name, entries in groups.items())
    except (KeyError, TypeError, ValueError) as err:
        raise InputFileError(f"{run.source}: a result cannot be read back ({type(err).__name__}: {err})") from None
    seeds = {(e.identity or {}).get("seed") for e in run.entries} - {None}
    return BenchResult(reports, run.machine_info, run.datetime, float(info.get("wall_s") or 0.0), run.version,
                       bool(info.get("interrupted")), seeds.pop() if len(seeds) == 1 else None)


def _shape_report(name: str, entries: list[Entry], run: Run, ratios: list, how: dict) -> ShapeReport:
    """``how``: the file's record of how the shape was timed (stop reason, discarded rounds, clock floor, options)."""
    shape = GemmShape.from_dict(entries[0].extra_info["shape"])
    checks = {e.config: _check(shape, e, run) for e in entries if e.extra_info.get("scenarios")}
    arms = tuple(ArmTiming(e.config, tuple(x * 1e6 for x in e.stats["data"]),
                           tuple(x * 1e6 for x in (e.extra_info.get("eager_stats") or {}).get("data") or ()),
                           # the file keeps the median SM clock of an arm, not each batch's
                           (e.extra_info["sm_clock_mhz"],) if e.extra_info.get("sm_clock_mhz") else (),
                           kernel_us=e.extra_info["kernel_time_s"] * 1e6 if e.extra_info.get("kernel_time_s") else None,
                           kernels=e.extra_info.get("timed_kernels") or "",
                           setups=tuple(e.extra_info.get("setups") or ()))
                 for e in entries if e.stats and e.stats.get("data"))
    timing = None
    if arms:
        info = entries[0].extra_info
        timing = ShapeTiming(name, shape.flop, int(info.get("calls_per_batch") or 0), int(info.get("buffer_sets") or 1),
                             len(arms[0].graph_us), arms, tuple(Ratio(**r) for r in ratios),
                             float(info.get("timing_elapsed_s") or 0.0), how.get("stop_reason") or "",
                             Discards(**(how.get("discards") or {})), how.get("clock_floor_mhz"),
                             options=how.get("options") or {})
    errors = {e.extra_info.get("error") for e in entries} - {None}
    return ShapeReport(shape, checks, timing, "; ".join(sorted(errors)) or None)


def _check(shape: GemmShape, entry: Entry, run: Run) -> GemmCheck:
    info = entry.extra_info
    config = GemmConfig.from_dict(info["config"]) if info.get("config") else GemmConfig.parse(entry.config)
    results = []
    for raw in info["scenarios"]:
        kind = raw.get("kind") or REGISTRY[raw["scenario"]].kind  # 0.1 files: the registry knows the kind
        results.append(ScenarioResult.from_dict({**raw, "kind": kind}))
    rel_error = info.get("rel_error")
    identity = entry.identity or {}
    return GemmCheck(shape, config, info.get("mode_source") or "argument", int(identity.get("seed") or 0),
                     info.get("digest") or "", float("nan") if rel_error is None else float(rel_error), tuple(results),
                     run.machine_info, error=None, input_digests=identity.get("inputs") or {},
                     kernels=KernelSignature.from_dict(info["kernels"]) if info.get("kernels") else None)


def stored_ratios(run: Run, numerator: str, denominator: str) -> dict:
    """{shape name: (Ratio, setups)} of a stored bench run's ``numerator``/``denominator`` ratios, with the
    number of setups (visits) its interval was taken over; :class:`InputFileError` (one line) when the
    run has none, or one that cannot be a time ratio."""
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
