"""``batch-invariance``: do the rows of a GEMM keep their bits when the batch around them shrinks?"""

from __future__ import annotations

import dataclasses

from ...bits.compare import compare
from ...core.shapes import GemmShape, batch_ladder
from ...results.check import Kind
from .base import Scenario, ScenarioContext


def not_applicable_reason(shape: GemmShape) -> str | None:
    """Why neither the batch (the token axis T) nor the batch count can be shrunk for this GEMM, or None."""
    if shape.batch > 1:
        return None
    if shape.gemm_pass == "dW":
        return "the batch (T) is K, the reduction axis of a dW GEMM: fewer tokens give another sum"
    if shape.m < 2:
        return "M = 1: no smaller batch"
    return None


def _rungs(shape: GemmShape) -> list:
    """``(label, rows, matrices)`` to compute alone: the first m rows of each matrix (not where the rows are a
    dW's reduction axis, or M = 1), then, in a batch, the first b matrices whole."""
    rows = [] if shape.gemm_pass == "dW" or shape.m < 2 else [(f"m = {m}", m, shape.batch) for m in
                                                              batch_ladder(shape.m)]
    return rows + [(f"b = {count}", shape.m, count) for count in batch_ladder(shape.batch)]


def _batch_invariance(context: ScenarioContext):
    reason = not_applicable_reason(context.shape)
    if reason:
        return BATCH_INVARIANCE.does_not_apply(reason)
    import cupy  # after the shape's own answer, which needs no GPU
    shape, a, b = context.shape, context.a, context.b
    differing, mismatches, signatures, extra = {}, [], {}, {"mismatched_by_m": {}}
    for label, rows, matrices in _rungs(shape):
        sliced = dataclasses.replace(shape, m=rows, batch=matrices)
        a_part = a[:matrices] if matrices < shape.batch else a
        a_rows = cupy.ascontiguousarray(a_part[..., :rows] if shape.trans_a else a_part[..., :rows, :])
        b_part = cupy.ascontiguousarray(b[:matrices]) if matrices < shape.batch else b
        out = context.new_output(rows)[:matrices] if shape.batch > 1 else context.new_output(rows)
        signatures[label] = context.traced(lambda: context.gemm(a_rows, b_part, out, context.handle, sliced))
        mismatch = compare(context.reference[:matrices, ..., :rows, :] if shape.batch > 1 else
                           context.reference[..., :rows, :], out)
        mismatches.append(mismatch)
        axis, value = ("m", rows) if matrices == shape.batch else ("batch", matrices)
        extra.setdefault(f"mismatched_by_{axis}", {})[value] = mismatch.mismatched_elements
        if not mismatch.identical:
            differing.setdefault(axis, []).append(value)
    labels = [f"{'m' if axis == 'm' else 'b'} = {value}" for axis, values in differing.items() for value in values]
    extra.update(context.kernel_extra(signatures, labels))
    what = []
    if shape.gemm_pass != "dW" and shape.m > 1:
        what.append(f"the first m rows of op(A) @ op(B){' in each matrix of the batch' if shape.batch > 1 else ''} "
                    f"against the same rows of the full M = {shape.m} product, m in {batch_ladder(shape.m)}")
    if shape.batch > 1:
        what.append(f"the first b matrices against the same of the full batch, b in {batch_ladder(shape.batch)}")
    found = "; ".join(f"{'m' if axis == 'm' else 'b'} = {values}" for axis, values in differing.items())
    detail = f"{'; '.join(what)}: {f'bits differ for {found}' if differing else 'every row identical'}"
    if labels and extra.get("kernel_changes"):
        detail += f" ({labels[0]}: {extra['kernel_changes'][labels[0]]})"
    return BATCH_INVARIANCE.from_mismatches(mismatches, detail, extra)


BATCH_INVARIANCE = Scenario(
    "batch-invariance", "rows of op(A)[:m] @ op(B) against the same rows of the full product for m = 1, 2, 4, "
    "..., M-1 (not in dW GEMMs, whose batch is the reduction axis); in a batched GEMM, its first b matrices too",
    Kind.HAZARD, "batch size",
    _batch_invariance, evidence=lambda result, targets: "for every row count m checked", lock="rows")
