"""The one reader of ``CUBLAS_DET_*`` variables, and of the variables that change cuBLAS.

Variables are read at call time, never cached at import, so a test or a launcher can change them.
"""

from __future__ import annotations

import os

MATH_MODE_VAR = "CUBLAS_DET_MATH_MODE"

# Variables that change what cuBLAS computes or how CuPy calls it, recorded with every result.
# Every CUBLAS_* and CUBLASLT_* variable is recorded too (CUBLAS_WORKSPACE_CONFIG,
# CUBLAS_EMULATE_*, CUBLAS_EMULATION_STRATEGY, CUBLAS_DET_*, logging switches ...).
_NAMED_VARS = ("NVIDIA_TF32_OVERRIDE", "CUPY_TF32", "CUDA_VISIBLE_DEVICES", "CUDA_MODULE_LOADING")
_VAR_PREFIXES = ("CUBLAS_", "CUBLASLT_")


def read_math_mode_env() -> str | None:
    """The raw value of ``CUBLAS_DET_MATH_MODE``; ``None`` when unset or empty (empty means unset)."""
    value = os.environ.get(MATH_MODE_VAR, "").strip()
    return value or None


def cublas_env_vars() -> dict[str, str]:
    """Every set variable that changes cuBLAS behaviour, name -> value, sorted by name."""
    found = {
        name: value
        for name, value in os.environ.items()
        if name in _NAMED_VARS or name.startswith(_VAR_PREFIXES)
    }
    return dict(sorted(found.items()))


def tf32_env_warnings(mode_is_tf32: bool) -> list[str]:
    """Warnings for env vars that defeat the requested math mode (empty when none applies)."""
    warnings = []
    if os.environ.get("CUPY_TF32", "0").strip() == "1" and not mode_is_tf32:
        warnings.append(
            "CUPY_TF32=1: cupy.matmul asks for CUBLAS_COMPUTE_32F_FAST_TF32, which a PEDANTIC or "
            "DEFAULT math mode does not override, so CuPy's GEMMs still use TF32; unset CUPY_TF32"
        )
    if os.environ.get("NVIDIA_TF32_OVERRIDE", "").strip() == "0" and mode_is_tf32:
        warnings.append(
            "NVIDIA_TF32_OVERRIDE=0 disables TF32 in every NVIDIA library: TF32 was requested "
            "but fp32 arithmetic will run; unset NVIDIA_TF32_OVERRIDE"
        )
    return warnings
