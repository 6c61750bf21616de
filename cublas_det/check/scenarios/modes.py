"""``modes``: which math modes give the same bits, and the math-mode x compute-type matrix."""

from __future__ import annotations

import dataclasses

from ...bindings.cublas import ComputeType, CublasError, MathMode
from ...bits.compare import compare, relative_error
from ...bits.digest import ALGORITHM, device_digest, digest_groups
from ...core.call import gemm
from ...core.config import COMPUTE_TYPES, DEFAULT_MODES, HALF_DEFAULT_MODES, GemmConfig, math_modes
from ...core.handle import create_handle
from ...core.operands import fp64_reference, output
from ...results.check import Kind
from .base import Scenario, ScenarioContext

MODES = math_modes(DEFAULT_MODES)
MATRIX_COMPUTE_TYPES = (ComputeType.COMPUTE_32F, ComputeType.COMPUTE_32F_PEDANTIC, ComputeType.COMPUTE_32F_FAST_TF32)
# In half precision TF32 does not apply: the choices are the DISALLOW flag and the compute types.
HALF_MODES = math_modes(HALF_DEFAULT_MODES)
HALF_COMPUTE_TYPES = (ComputeType.COMPUTE_32F, ComputeType.COMPUTE_32F_PEDANTIC, ComputeType.COMPUTE_16F,
                      ComputeType.COMPUTE_16F_PEDANTIC)
RUN_CONFIGS = "run configurations"  # key in ScenarioContext.shared: every configuration of the run
# The fields that make a configuration a cuBLASLt one, at their cublasGemmEx values.
_LT_DEFAULTS = {f.name: f.default for f in dataclasses.fields(GemmConfig)
                if f.name == "api" or f.name.startswith("lt_")}


def _variant(config: GemmConfig) -> tuple:
    return tuple(getattr(config, field) for field in _LT_DEFAULTS)


def _interfaces(config: GemmConfig, run_configs) -> list[GemmConfig]:
    """``config`` through cublasGemmEx and every cuBLASLt variant of the run's configurations of its element
    types (a bias epilogue's is compared with its own rows only: it adds to the product)."""
    if config.lt_epilogue:
        return [config]
    types = (config.input_dtype, config.output_dtype)
    gemm_ex = config if config.api == "gemm_ex" else dataclasses.replace(config, **_LT_DEFAULTS)
    variants = {}
    for other in (*run_configs, config):
        if other.api == "lt" and not other.lt_epilogue and (other.input_dtype, other.output_dtype) == types:
            variants.setdefault(_variant(other),
                                dataclasses.replace(gemm_ex, algo=-1, disallow_reduced_precision_reduction=False,
                                                    **{field: getattr(other, field) for field in _LT_DEFAULTS}))
    return [gemm_ex, *variants.values()]


def matrix(config: GemmConfig, run_configs=()) -> list[tuple[GemmConfig, ComputeType]]:
    """The cells: a handle's configuration and the compute type of the call. Rows: the default modes, every
    math mode of ``run_configs`` of these element types and each cuBLASLt variant: one matrix per type."""
    types = (config.input_dtype, config.output_dtype)
    same_types = [c for c in (*run_configs, config) if (c.input_dtype, c.output_dtype) == types]
    if config.input_dtype == "float32":
        gemm_ex_modes, gemm_ex_flags = MODES, (config.disallow_reduced_precision_reduction,)
        computes = MATRIX_COMPUTE_TYPES
    else:
        gemm_ex_modes, gemm_ex_flags, computes = HALF_MODES, (False, True), HALF_COMPUTE_TYPES
    allowed = COMPUTE_TYPES[types]
    cells = []
    for base in _interfaces(config, run_configs):
        if base.api == "lt":  # no math mode flag, no BF16X9; PEDANTIC and DEFAULT are one cuBLASLt call
            flags = (False,)
            modes = tuple(mode for mode in gemm_ex_modes if mode is not MathMode.PEDANTIC)
            asked = [c.math_mode for c in same_types if c.api == "lt" and _variant(c) == _variant(base)]
        else:
            flags, modes, asked = gemm_ex_flags, gemm_ex_modes, [c.math_mode for c in same_types]
        modes += tuple(mode for mode in dict.fromkeys(asked) if mode not in modes)
        base = dataclasses.replace(base, compute_type=ComputeType.COMPUTE_32F)
        cells += [(dataclasses.replace(base, math_mode=mode, disallow_reduced_precision_reduction=flag), compute)
                  for mode in modes for flag in flags for compute in computes if compute in allowed]
    return cells


def identical_groups(digests: dict[str, str]) -> list[list[str]]:
    """Names grouped by digest, in first-seen order: ``[["PEDANTIC", "DEFAULT"], ["TF32"]]``."""
    return list(digest_groups(digests.items()).values())


def _matrix(context: ScenarioContext) -> dict:
    """Digest and error of every math mode x compute type, and each mode's COMPUTE_32F output."""
    reference64 = fp64_reference(context.shape, context.a, context.b, context.shared)
    cells, outputs = {}, {}
    for config, compute in matrix(context.config, context.shared.get(RUN_CONFIGS, ())):
        with create_handle(config) as handle:
            out = output(context.shape, config)
            try:
                gemm(context.a, context.b, out=out, handle=handle, trans_a=context.shape.trans_a,
                     trans_b=context.shape.trans_b, compute_type=compute)
            except CublasError as err:
                if config.api != "lt":
                    raise
                cells[f"{config.name}/{compute.name}"] = {"digest": None, "error": str(err)}  # no such Lt algorithm
                continue
            # Compared within the run only: hashed where the output is (one pass, no host copy).
            cells[f"{config.name}/{compute.name}"] = {
                "digest": device_digest(out), "rel_error": relative_error(out, reference64)}
            if compute is ComputeType.COMPUTE_32F:
                outputs[config.name] = out
    groups = identical_groups({name: cells[f"{name}/COMPUTE_32F"]["digest"] for name in outputs})
    all_groups = identical_groups({name: cell["digest"] for name, cell in cells.items() if cell["digest"]})
    return {"cells": cells, "groups": groups, "all_groups": all_groups, "outputs": outputs}


def matrix_key(config: GemmConfig, run_configs=()) -> tuple:
    """A configuration's matrix is its cells: equal keys, one matrix computed for both."""
    return ("modes",) + tuple(f"{cell.name}/{compute.name}" for cell, compute in matrix(config, run_configs))


def _modes(context: ScenarioContext):
    # Configurations share a matrix only when it is the same one (element types; in fp32, the flag).
    key = matrix_key(context.config, context.shared.get(RUN_CONFIGS, ()))
    if key not in context.shared:
        context.shared[key] = _matrix(context)
    table = context.shared[key]
    others = {name: out for name, out in table["outputs"].items() if name != context.config.name}
    mismatches = [compare(context.reference, out) for out in others.values()]
    # Compared with this configuration's own output: right also for a compute type in no group of modes.
    same = [name for name, mismatch in zip(others, mismatches) if mismatch.identical]
    # The matrix's digests are the device digest, not the sha256 of a result.
    extra = {"matrix": table["cells"], "digest_algorithm": ALGORITHM, "groups": table["groups"],
             "all_groups": table["all_groups"], "same_bits_as": same}
    return MODES_SCENARIO.from_mismatches(mismatches, " | ".join(" = ".join(group) for group in table["groups"]),
                                          extra)


MODES_SCENARIO = Scenario("modes", "which math modes give identical bits, and the math-mode x compute-type matrix",
                          Kind.COMPARISON, "modes", _modes)
