"""The same GEMM again: on one handle (``repeat``) and on a new handle each time (``fresh-handle``)."""

from __future__ import annotations

import dataclasses

from ...bits.compare import MismatchTracker
from ...results.check import Kind
from .base import Scenario, ScenarioContext


def _repeat(context: ScenarioContext):
    out = context.new_output()
    tracker = MismatchTracker(context.reference, context.repeats - 1)
    for _ in range(context.repeats - 1):
        context.gemm(context.a, context.b, out, context.handle, context.shape)
        tracker.record(out)
    summary = tracker.summary()
    # Count the reference run itself among the runs (N runs = the reference + N-1 compared with it).
    return REPEAT.from_runs(dataclasses.replace(summary, runs=summary.runs + 1),
                            "runs after the first, compared with it")


def _fresh_handle(context: ScenarioContext):
    runs = max(2, min(context.repeats, 10))  # cublasCreate/Destroy synchronize the device: keep it short
    out = context.new_output()
    tracker = MismatchTracker(context.reference, runs)
    for _ in range(runs):
        with context.new_handle(stream=context.stream) as fresh:
            context.gemm(context.a, context.b, out, fresh, context.shape)
            tracker.record(out)
    return FRESH_HANDLE.from_runs(tracker.summary(), f"{runs} handles, one run each")


REPEAT = Scenario("repeat", "one handle on one stream runs the GEMM N times; every output is compared with the first",
                  Kind.GUARANTEE, "repeat", _repeat, lock="bits")
FRESH_HANDLE = Scenario("fresh-handle", "a new cuBLAS handle for every run, on the same stream",
                        Kind.GUARANTEE, "fresh handle", _fresh_handle)
