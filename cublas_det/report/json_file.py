"""A benchmark run as JSON in pytest-benchmark's layout, with digests, configurations and verdicts."""

from __future__ import annotations

import datetime

from .._timing import quartiles
from ..results import BenchResult
from .text import summary_lines, warnings_for
from .verdicts import check_failures, modes_group


def identity(shape, config_name: str, seed: int | None, input_digests: dict | None, numpy_version: str | None) -> dict:
    """What makes two results comparable: the GEMM, its configuration, its preset and T, the seed, the
    sha256 digests of the inputs, and the NumPy that made them (its seeded stream is promised per build)."""
    return {"m": shape.m, "n": shape.n, "k": shape.k, "op": shape.cublas_op, "config": config_name,
            "preset": shape.preset, "tokens": shape.tokens, "seed": seed, "inputs": input_digests or None,
            "numpy": numpy_version}


def benchmark_entry(shape, mode: str, stats: dict | None, extra_info: dict) -> dict:
    """One shape in one configuration as a pytest-benchmark entry; --compare matches entries by ``name``."""
    return {"group": shape.name, "name": f"{shape.name}[{mode}]",
            "fullname": f"cublas_det.bench::{shape.name}[{mode}]", "params": {"shape": shape.spec, "mode": mode},
            "param": mode, "stats": stats, "extra_info": extra_info}


def stats(samples_us) -> dict:
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
            benchmarks.append(benchmark_entry(report.shape, mode, stats(arm.graph_us) if arm else None, {
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
                "eager_stats": stats(arm.eager_us) if arm else None,
                "calls_per_batch": report.timing.calls_per_batch if report.timing else None,
                "buffer_sets": report.timing.buffer_sets if report.timing else None,
                "timing_elapsed_s": report.timing.elapsed_s if report.timing else None,
                "ratio_to_pedantic": ratio.to_dict() if ratio else None,
                "error": report.error or (check.error if check else None),
            }))
    ratios = {r.shape.name: [x.to_dict() for x in r.timing.ratios] for r in result.shapes if r.timing}
    return {"machine_info": result.provenance, "commit_info": {}, "benchmarks": benchmarks,
            "datetime": result.started, "version": result.version, "cublas_det": {
                "wall_s": result.wall_s, "interrupted": result.interrupted, "ratios": ratios,
                "summary": summary_lines(result), "warnings": warnings_for(result)}}


def now_iso() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
