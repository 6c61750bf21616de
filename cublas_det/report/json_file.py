"""A benchmark run as JSON in pytest-benchmark's layout, with digests, configurations and verdicts.

``pytest-benchmark compare`` reads the file: every entry has the stats fields pytest-benchmark
writes, computed its way (its quartile method, outlier counts, ops = rounds / total), in seconds
per GEMM with ``iterations`` = GEMMs per sample. An entry that was not timed (``--no-timing``, a
device sweep) has the same fields with ``rounds`` 0.
"""

from __future__ import annotations

import datetime
import statistics
from bisect import bisect_left, bisect_right

from ..check.results import BenchResult
from .commit_info import commit_info
from .text import summary_lines, warnings_for
from .verdicts import check_failures, modes_group

STATS_FIELDS = ("min", "max", "mean", "stddev", "rounds", "median", "iqr", "q1", "q3", "iqr_outliers",
                "stddev_outliers", "outliers", "ld15iqr", "hd15iqr", "ops", "total", "data", "iterations")
TIMER = "CUDA events around a CUDA-graph batch, queued behind a blocking kernel"


def identity(shape, config_name: str, seed: int | None, input_digests: dict | None, numpy_version: str | None) -> dict:
    """What makes two results comparable: the GEMM, its configuration, its preset and T, the seed, the
    sha256 digests of the inputs, and the NumPy that made them (its seeded stream is promised per build)."""
    return {"m": shape.m, "n": shape.n, "k": shape.k, "op": shape.cublas_op, "config": config_name,
            "preset": shape.preset, "tokens": shape.tokens, "seed": seed, "inputs": input_digests or None,
            "numpy": numpy_version}


def benchmark_entry(shape, mode: str, stats: dict | None, extra_info: dict, options: dict | None = None) -> dict:
    """One shape in one configuration as a pytest-benchmark entry; --compare matches entries by ``name``.

    ``stats`` None (not timed) becomes :func:`empty_stats`, which pytest-benchmark still loads.
    """
    return {"group": shape.name, "name": f"{shape.name}[{mode}]",
            "fullname": f"cublas_det.bench::{shape.name}[{mode}]", "params": {"shape": shape.spec, "mode": mode},
            "param": mode, "stats": stats if stats is not None else empty_stats(), "options": options or {},
            "extra_info": extra_info}


def _quartile(data: list, rounds: int, upper: bool) -> float:
    """pytest-benchmark's q1/q3: Wikipedia's method 3 for an odd count, method 2 (medians of halves) for even."""
    if rounds == 1:
        return data[0]
    if rounds % 2:
        n, q = rounds // 4, rounds % 4
        if not upper:
            return 0.25 * data[n - 1] + 0.75 * data[n] if q == 1 else 0.75 * data[n] + 0.25 * data[n + 1]
        return (0.75 * data[3 * n] + 0.25 * data[3 * n + 1] if q == 1
                else 0.25 * data[3 * n + 1] + 0.75 * data[3 * n + 2])
    return statistics.median(data[rounds // 2:] if upper else data[:rounds // 2])


def stats(samples_us, iterations: int = 1) -> dict:
    """pytest-benchmark's stats of per-call times in µs, in seconds; ``iterations``: calls per sample."""
    data = [x * 1e-6 for x in samples_us]
    if not data:
        raise ValueError("no samples")
    ordered = sorted(data)
    rounds = len(data)
    mean = statistics.mean(data)
    stddev = statistics.stdev(data) if rounds > 1 else 0.0
    q1, q3 = _quartile(ordered, rounds, False), _quartile(ordered, rounds, True)
    iqr = q3 - q1
    stddev_outliers = sum(not mean - stddev <= x <= mean + stddev for x in data)
    iqr_outliers = sum(not q1 - 1.5 * iqr <= x <= q3 + 1.5 * iqr for x in data)
    if rounds == 1:
        ld15iqr = hd15iqr = data[0]
    else:
        ld15iqr = ordered[bisect_left(ordered, q1 - 1.5 * iqr)]
        # The highest datum within the fence (bisect_right is past it), as pytest-benchmark 5.3.1 fixed it.
        hd15iqr = ordered[bisect_right(ordered, q3 + 1.5 * iqr) - 1]
    total = sum(data)
    return {"min": ordered[0], "max": ordered[-1], "mean": mean, "stddev": stddev, "rounds": rounds,
            "median": statistics.median(data), "iqr": iqr, "q1": q1, "q3": q3, "iqr_outliers": iqr_outliers,
            "stddev_outliers": stddev_outliers, "outliers": f"{stddev_outliers};{iqr_outliers}",
            "ld15iqr": ld15iqr, "hd15iqr": hd15iqr, "ops": rounds / total if total else 0.0, "total": total,
            "data": data, "iterations": iterations}


def empty_stats() -> dict:
    """The stats of an entry that was not timed: every field, zero rounds, no data."""
    return {**{field: 0.0 for field in STATS_FIELDS}, "rounds": 0, "iqr_outliers": 0, "stddev_outliers": 0,
            "outliers": "0;0", "data": [], "iterations": 0}


def timing_options(timing) -> dict:
    """pytest-benchmark's ``options`` of a timed entry: how its samples were taken."""
    return {"timer": TIMER, "disable_gc": False, "min_time": 1e-3, "warmup": True,
            "min_rounds": timing.options.get("min_rounds"), "max_rounds": timing.options.get("max_rounds"),
            "max_time": timing.options.get("budget_s")}


def timing_extra(timing, mode: str) -> dict:
    """The timing facts of one arm for ``extra_info``: its interval, clock, the shape's trust and stop."""
    arm = timing.arm(mode)
    low, high = arm.median_ci_us
    kernels = {"kernel_time_s": arm.kernel_us * 1e-6, "timed_kernels": arm.kernels} if arm.kernel_us else {}
    setups = {"setups": list(arm.setups)} if arm.setups else {}  # of each sample in stats.data, in order
    return {**kernels, **setups, "median_ci_s": [low * 1e-6, high * 1e-6], "sm_clock_mhz": arm.median_clock_mhz,
            "stop_reason": timing.stop_reason, "timing_trusted": timing.trusted,
            "untrusted_reason": timing.untrusted_reason, "noise_floor": timing.noise_floor}


def to_json(result: BenchResult) -> dict:
    benchmarks = []
    for report in result.shapes:
        modes = list(report.checks)
        if report.timing:  # the arms no check covers, the A/A control included
            modes += [a.name for a in report.timing.arms if a.name not in modes]
        for mode in modes:
            check = report.checks.get(mode)
            arm = report.timing.arm(mode) if report.timing else None
            pedantic = report.timing.arm_name("PEDANTIC") if report.timing else None
            ratio = report.timing.ratio(mode, pedantic) if pedantic else None
            calls = report.timing.calls_per_batch if report.timing else None
            benchmarks.append(benchmark_entry(report.shape, mode, stats(arm.graph_us, calls) if arm else None, {
                "shape": report.shape.to_dict(),
                "identity": identity(report.shape, mode, check.seed if check else result.seed,
                                     check.input_digests if check else None,
                                     result.provenance.get("numpy_version")),
                "mode_source": check.mode_source if check else None,
                "config": check.config.to_dict() if check else None,
                "digest": check.digest if check else None,
                "rel_error": check.rel_error if check else None,
                "reproducible": check.verdict.value if check else None,
                "failures": check_failures(check) if check else [],
                "findings": [r.scenario for r in check.findings] if check else [],
                "same_bits_as": modes_group(check) if check else None,
                "scenarios": [r.to_dict() for r in check.scenarios] if check else [],
                **({"kernels": check.kernels.to_dict()} if check and check.kernels else {}),
                "eager_stats": stats(arm.eager_us, calls) if arm else None,
                "calls_per_batch": calls,
                "buffer_sets": report.timing.buffer_sets if report.timing else None,
                "timing_elapsed_s": report.timing.elapsed_s if report.timing else None,
                "ratio_to_pedantic": ratio.to_dict() if ratio else None,
                **(timing_extra(report.timing, mode) if arm else {}),
                "error": report.error or (check.error if check else None),
            }, timing_options(report.timing) if arm else None))
    ratios = {r.shape.name: [x.to_dict() for x in r.timing.ratios] for r in result.shapes if r.timing}
    timing = {r.shape.name: {k: v for k, v in r.timing.to_dict().items() if k not in ("arms", "ratios")}
              for r in result.shapes if r.timing}
    return {"machine_info": result.provenance, "commit_info": commit_info(), "benchmarks": benchmarks,
            "datetime": result.started, "version": result.version, "cublas_det": {
                "wall_s": result.wall_s, "phases_s": {name: round(s, 3) for name, s in result.phases.items()},
                "interrupted": result.interrupted, "ratios": ratios, "timing": timing,
                "summary": summary_lines(result), "warnings": warnings_for(result)}}


def now_iso() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
