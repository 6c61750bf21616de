"""The environment fingerprint: where a result came from (GPU, driver, CUDA runtime, cuBLAS, CuPy, env vars)."""

from __future__ import annotations

import platform
import sys


def fingerprint(device_id: int | None = None) -> dict:
    """Where a result came from: GPU, driver, CUDA runtime, cuBLAS, CuPy, env vars, host.

    Needs a GPU (call :func:`cublas_det._device.require_gpu` first).
    """
    import cupy
    import numpy

    from . import _cublas
    from ._device import cuda_version_text, device_properties
    from ._env import cublas_env_vars

    runtime = cupy.cuda.runtime
    _, library_path, found_via = _cublas.library()
    version = _cublas.cublas_get_version()
    return {
        "gpu": device_properties(device_id),
        "driver_version": cuda_version_text(runtime.driverGetVersion()),
        "runtime_version": cuda_version_text(runtime.runtimeGetVersion()),
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
