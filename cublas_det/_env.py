"""The one reader of ``CUBLAS_DET_*`` variables, and the environment fingerprint.

Variables are read at call time, never cached at import, so a test or a launcher can change them.
"""

from __future__ import annotations

import os
import platform
import sys

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


def fingerprint(device_id: int | None = None) -> dict:
    """Where a result came from: GPU, driver, CUDA runtime, cuBLAS, CuPy, env vars, host.

    Needs a GPU (call :func:`cublas_det._device.require_gpu` first).
    """
    import cupy
    import numpy

    from . import _cublas
    from ._device import device_properties

    runtime = cupy.cuda.runtime
    _, library_path, found_via = _cublas.library()
    version = _cublas.cublas_get_version()
    return {
        "gpu": device_properties(device_id),
        "driver_version": _cuda_version_text(runtime.driverGetVersion()),
        "runtime_version": _cuda_version_text(runtime.runtimeGetVersion()),
        "cublas_version": f"{version // 10000}.{version // 100 % 100}.{version % 100}",
        "cublas_library": library_path,
        "cublas_found_via": found_via,
        "cupy_version": cupy.__version__,
        "numpy_version": numpy.__version__,
        "python_version": platform.python_version(),
        "platform": platform.platform(),
        "hostname": platform.node(),
        "python": sys.executable,
        "env": cublas_env_vars(),
    }


def _cuda_version_text(value: int) -> str:
    """CUDA encodes versions as 1000*major + 10*minor (13000 -> '13.0')."""
    return f"{value // 1000}.{value % 1000 // 10}"
