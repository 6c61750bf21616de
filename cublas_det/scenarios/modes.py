"""``modes``: which math modes give the same bits, and the math-mode x compute-type matrix."""

from __future__ import annotations

from .. import _compare
from .._cublas import ComputeType, MathMode
from ..operands import fp64_reference
from ..results import Kind
from .base import Scenario, ScenarioContext, worst_of

MODES = (MathMode.PEDANTIC, MathMode.DEFAULT, MathMode.TF32)
MATRIX_COMPUTE_TYPES = (ComputeType.COMPUTE_32F, ComputeType.COMPUTE_32F_PEDANTIC, ComputeType.COMPUTE_32F_FAST_TF32)


def identical_groups(digests: dict[str, str]) -> list[list[str]]:
    """Names grouped by digest, in first-seen order: ``[["PEDANTIC", "DEFAULT"], ["TF32"]]``."""
    groups: dict[str, list[str]] = {}
    for name, value in digests.items():
        groups.setdefault(value, []).append(name)
    return list(groups.values())


def _matrix(context: ScenarioContext) -> dict:
    """Digest and error of every math mode x compute type, and each mode's COMPUTE_32F output.

    Computed once per shape (the first configuration to ask stores it in ``context.shared``).
    """
    import cupy

    from .._gemm import gemm
    from .._handle import create_handle

    reference64 = fp64_reference(context.shape, context.a, context.b)
    cells, outputs = {}, {}
    for mode in MODES:
        config = context.config.with_math_mode(mode)
        with create_handle(config) as handle:
            for compute in MATRIX_COMPUTE_TYPES:
                out = cupy.empty((context.shape.m, context.shape.n), config.output_dtype)
                gemm(context.a, context.b, out=out, handle=handle, trans_a=context.shape.trans_a,
                     trans_b=context.shape.trans_b, compute_type=compute)
                cells[f"{config.name}/{compute.name}"] = {
                    "digest": _compare.digest(out), "rel_error": _compare.relative_error(out, reference64)}
                if compute is ComputeType.COMPUTE_32F:
                    outputs[config.name] = out
    groups = identical_groups({name: cells[f"{name}/COMPUTE_32F"]["digest"] for name in outputs})
    return {"cells": cells, "groups": groups, "outputs": outputs}


def _modes(context: ScenarioContext):
    if "modes" not in context.shared:
        context.shared["modes"] = _matrix(context)
    matrix = context.shared["modes"]
    others = {name: out for name, out in matrix["outputs"].items() if name != context.config.name}
    mismatches = [_compare.compare(context.reference, out) for out in others.values()]
    differing = sum(not m.identical for m in mismatches)
    return MODES_SCENARIO.from_worst(len(others), differing, worst_of(mismatches),
                                     " | ".join(" = ".join(group) for group in matrix["groups"]),
                                     {"matrix": matrix["cells"], "groups": matrix["groups"]})


MODES_SCENARIO = Scenario("modes", "which math modes give identical bits, and the math-mode x compute-type matrix",
                          Kind.COMPARISON, "modes", _modes)
