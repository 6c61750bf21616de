"""A benchmark run read back from its ``--json`` file, as the results it was rendered from.

The inverse of :func:`cublas_det.report.json_file.to_json`, so that a stored run can be rendered
again (``python -m cublas_det.report``). Files of cublas_det 0.1 carry no scenario kinds: the
registry supplies them.
"""

from __future__ import annotations

import dataclasses

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
    """The :class:`BenchResult` a stored benchmark run was written from.

    :func:`~cublas_det.runfile.run_from_dict` checked each field's type; what only the result types
    can tell (a math mode or scenario this version does not know) is one line naming the field here.
    """
    if run.sweep:
        raise InputFileError(f"{run.source}: a --devices sweep has no per-mode tables to render; compare it with "
                             "python -m cublas_det.compare")
    groups: dict[str, list[Entry]] = {}
    for entry in run.entries:
        groups.setdefault(entry.shape_name, []).append(entry)
    info = run.data.get("cublas_det") or {}
    ratios = info.get("ratios") or {}
    timings = info.get("timing") or {}
    reports = tuple(_shape_report(name, entries, run, ratios.get(name) or [], timings.get(name) or {})
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


def _known_fields(cls, data: dict) -> dict:
    """The keys of ``data`` that dataclass ``cls`` has: fields written by other versions are left out."""
    names = {field.name for field in dataclasses.fields(cls)}
    return {key: value for key, value in data.items() if key in names}


def _shape_report(name: str, entries: list[Entry], run: Run, ratios: list, how: dict) -> ShapeReport:
    """``how``: the file's record of how the shape was timed (stop reason, discarded rounds, clock floor, options)."""
    where = f"{run.source}: benchmark {entries[0].name!r}: extra_info.shape"
    shape = _read_back(where, GemmShape.from_dict, entries[0].extra_info["shape"])
    checks = {e.config: _check(shape, e, run) for e in entries if e.extra_info.get("scenarios")}
    for e in entries:
        if e.stats and e.stats.get("data") and not (e.extra_info.get("eager_stats") or {}).get("data"):
            raise InputFileError(f"{run.source}: benchmark {e.name!r}: extra_info.eager_stats.data: missing; a timed "
                                 "entry has its eager times too")
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
        where = f"{run.source}: cublas_det"
        timing = ShapeTiming(name, shape.flop, int(info.get("calls_per_batch") or 0), int(info.get("buffer_sets") or 1),
                             len(arms[0].graph_us), arms,
                             tuple(_read_back(f"{where}.ratios[{name!r}]", lambda r: Ratio(**_known_fields(Ratio, r)), r)
                                   for r in ratios),
                             float(info.get("timing_elapsed_s") or 0.0), how.get("stop_reason") or "",
                             Discards(**_known_fields(Discards, how.get("discards") or {})), how.get("clock_floor_mhz"),
                             options=how.get("options") or {})
    errors = {e.extra_info.get("error") for e in entries} - {None}
    return ShapeReport(shape, checks, timing, "; ".join(sorted(errors)) or None)


def _check(shape: GemmShape, entry: Entry, run: Run) -> GemmCheck:
    info = entry.extra_info
    where = f"{run.source}: benchmark {entry.name!r}: extra_info"
    if info.get("config"):
        config = _read_back(f"{where}.config", GemmConfig.from_dict, info["config"])
    else:
        config = _read_back(f"{where}: configuration", GemmConfig.parse, entry.config)
    results = tuple(_read_back(f"{where}.scenarios[{i}]", _scenario, raw) for i, raw in enumerate(info["scenarios"]))
    rel_error = info.get("rel_error")
    identity = entry.identity or {}
    # A check whose GEMM could not be computed has no digest and the error; its verdict is "error"
    # even when only hazard scenarios were asked (with no guarantee it would read "not checked").
    error = info.get("error") if not info.get("digest") else None
    return GemmCheck(shape, config, info.get("mode_source") or "argument", int(identity.get("seed") or 0),
                     info.get("digest") or "", float("nan") if rel_error is None else float(rel_error), results,
                     run.machine_info, error=error, input_digests=identity.get("inputs") or {},
                     kernels=_read_back(f"{where}.kernels", KernelSignature.from_dict, info["kernels"])
                     if info.get("kernels") else None)


def _scenario(raw: dict) -> ScenarioResult:
    if raw["scenario"] not in REGISTRY:  # the reports lay scenarios out in the registry's order
        raise ValueError(f"scenario {raw['scenario']!r} is not one this version knows ({', '.join(REGISTRY)})")
    # 0.1 files: the registry knows the kind
    return ScenarioResult.from_dict({**raw, "kind": raw.get("kind") or REGISTRY[raw["scenario"]].kind})


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
