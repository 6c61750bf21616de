"""``batch-invariance``: do the rows of a GEMM keep their bits when the batch around them shrinks?"""

from __future__ import annotations

import dataclasses

from ...bits.compare import compare
from ...shapes import GemmShape, batch_ladder
from ..results import Kind
from .base import Scenario, ScenarioContext


def not_applicable_reason(shape: GemmShape) -> str | None:
    """Why the batch (the token axis T) cannot be shrunk for this GEMM, or None."""
    if shape.gemm_pass == "dW":
        return "the batch (T) is K, the reduction axis of a dW GEMM: fewer tokens give another sum"
    if shape.m < 2:
        return "M = 1: no smaller batch"
    return None


def _batch_invariance(context: ScenarioContext):
    import cupy
    reason = not_applicable_reason(context.shape)
    if reason:
        return BATCH_INVARIANCE.does_not_apply(reason)
    shape, a = context.shape, context.a
    differing, mismatches, per_m, signatures = [], [], {}, {}
    ladder = batch_ladder(shape.m)
    for rows in ladder:
        sliced = dataclasses.replace(shape, m=rows)
        a_rows = cupy.ascontiguousarray(a[..., :rows] if shape.trans_a else a[..., :rows, :])  # each matrix's rows
        out = context.new_output(rows)
        signatures[f"m = {rows}"] = context.traced(lambda: context.gemm(a_rows, context.b, out, context.handle, sliced))
        mismatch = compare(context.reference[..., :rows, :], out)
        mismatches.append(mismatch)
        per_m[rows] = mismatch.mismatched_elements
        if not mismatch.identical:
            differing.append(rows)
    extra = {"mismatched_by_m": per_m}
    extra.update(context.kernel_extra(signatures, [f"m = {rows}" for rows in differing]))
    what = (f"the first m rows of op(A) @ op(B){' in each matrix of the batch' if shape.batch > 1 else ''} against "
            f"the same rows of the full M = {shape.m} product, m in {ladder}")
    detail = f"{what}: bits differ for m = {differing}" if differing else f"{what}: every row identical"
    if differing and extra.get("kernel_changes"):
        detail += f" (m = {differing[0]}: {extra['kernel_changes'][f'm = {differing[0]}']})"
    return BATCH_INVARIANCE.from_mismatches(mismatches, detail, extra)


BATCH_INVARIANCE = Scenario(
    "batch-invariance", "rows of op(A)[:m] @ op(B) against the same rows of the full product for m = 1, 2, 4, "
    "..., M-1 (not in dW GEMMs, whose batch is the reduction axis)", Kind.HAZARD, "batch size",
    _batch_invariance, evidence=lambda result, targets: "for every row count m checked", lock="rows")
