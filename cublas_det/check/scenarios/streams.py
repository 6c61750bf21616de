"""Concurrent streams: one handle shared by them (the hazard cuBLAS documents) or one handle each (its remedy)."""

from __future__ import annotations

import dataclasses

from ...bits.compare import MismatchTracker
from ...core.handle import create_handle
from ...results.check import Kind
from .base import Scenario, ScenarioContext
from .processes import WORKSPACE_CONFIG

STREAMS = 4
# The kernel change on a shared handle when every stream ran the reference's kernels.
SAME_KERNELS = ("same kernels and grids on every stream as alone: what differs is inside them (the streams share "
                "the handle's workspace)")


def concurrent_streams(context: ScenarioContext, shared: bool):
    """The GEMM on STREAMS streams at once, round after round, every output compared: ``(RunsSummary, rounds)``."""
    import cupy
    rounds = max(4, -(-max(context.repeats, 16) // STREAMS))
    streams = [cupy.cuda.Stream(non_blocking=True) for _ in range(STREAMS)]
    outs = [context.new_output() for _ in range(STREAMS)]
    tracker = MismatchTracker(context.reference, rounds * STREAMS)
    if shared:
        # cuBLAS's own workspace pool, shared by the streams: the hazard, sized by CUBLAS_WORKSPACE_CONFIG.
        one = create_handle(dataclasses.replace(context.config, workspace_bytes=None)
                            if context.config.api == "gemm_ex" else context.config)  # cuBLASLt: its own workspace
        handles = [one] * STREAMS
    else:
        handles = [context.new_handle(stream=s) for s in streams]
    try:
        compared = context.stream.record()
        for _ in range(rounds):
            done = []
            for s, h, out in zip(streams, handles, outs):
                s.wait_event(compared)  # do not overwrite an output before it was compared
                if shared:
                    h.set_stream(s)
                context.gemm(context.a, context.b, out, h, context.shape)
                done.append(s.record())
            for event, out in zip(done, outs):
                context.stream.wait_event(event)
                tracker.record(out)
            compared = context.stream.record()
        context.stream.synchronize()
    finally:
        for h in set(handles):
            h.close()
    return tracker.summary(), rounds


def _shared_handle(context: ScenarioContext):
    summary, rounds = concurrent_streams(context, shared=True)  # the verdict: never under CUPTI
    label = f"{STREAMS} streams"
    detail = f"{rounds} rounds x {STREAMS} streams on one handle"
    if not (context.kernels and summary.differing_runs):
        return STREAMS_SHARED_HANDLE.from_runs(summary, detail)
    # The kernels behind the difference, from a second pass of the same rounds under CUPTI.
    signature = context.traced(lambda: concurrent_streams(context, shared=True), calls=None)
    extra = context.kernel_extra({label: signature}, [label], same=SAME_KERNELS)
    extra["kernel_changes"][label] = f"in a second pass, recorded: {extra['kernel_changes'][label]}"
    detail += f" ({extra['kernel_changes'][label]})"
    return STREAMS_SHARED_HANDLE.from_runs(summary, detail, **extra)


def _handle_per_stream(context: ScenarioContext):
    summary, rounds = concurrent_streams(context, shared=False)
    return STREAMS_PER_HANDLE.from_runs(summary, f"{rounds} rounds x {STREAMS} streams, one handle each")


STREAMS_SHARED_HANDLE = Scenario(
    "streams-shared-handle",
    f"one handle issues the GEMM on {STREAMS} concurrent streams (the hazard cuBLAS documents)",
    Kind.HAZARD, "shared handle", _shared_handle,
    evidence=lambda result, targets: f"in {result.runs} runs on {STREAMS} streams of one handle",
    setup_cures=(("streams-per-handle", "a handle and workspace per stream"),
                 ("workspace-config", f"CUBLAS_WORKSPACE_CONFIG={WORKSPACE_CONFIG}")), lock="workspace")
STREAMS_PER_HANDLE = Scenario(
    "streams-per-handle", f"one handle per stream on {STREAMS} concurrent streams (the remedy cuBLAS documents)",
    Kind.GUARANTEE, "handle per stream", _handle_per_stream)
