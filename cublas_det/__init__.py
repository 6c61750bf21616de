"""cublas_det: are your cuBLAS GEMMs bit-for-bit reproducible, and what does determinism cost? (README's API);
also :mod:`cublas_det.testing`, :mod:`cublas_det.trace` and :mod:`cublas_det.pytest_plugin`."""

import importlib

# Where each name of the package's face lives: imported on first use, so that a process which only enters a
# program (cublas-det run's sitecustomize) or asks for --help pays for none of them.
_HOMES = {"ComputeType": ".bindings.cublas", "CublasError": ".bindings.cublas", "MathMode": ".bindings.cublas", "gemm": ".core.call",
          "prepare_gemm": ".core.call", "check_gemm": ".check", "check_many": ".check", "GemmCheck": ".results.check",
          "GemmConfig": ".core.config", "NoGpuError": ".core.device", "gpu_available": ".core.device", "Handle": ".core.handle",
          "create_handle": ".core.handle", "math_mode": ".core.handle", "GemmShape": ".core.shapes"}

__version__ = "0.2.0"

__all__ = sorted(_HOMES)


def __getattr__(name: str):
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'cublas_det' has no attribute {name!r}")
    value = globals()[name] = getattr(importlib.import_module(home, __name__), name)
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
