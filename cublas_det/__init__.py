"""cublas_det: are your cuBLAS GEMMs bit-for-bit reproducible, and what does determinism cost? (README's API);
also :mod:`cublas_det.testing`, :mod:`cublas_det.trace` and :mod:`cublas_det.pytest_plugin`."""

from ._cublas import ComputeType, CublasError, MathMode
from .call import gemm, prepare_gemm
from .check import check_gemm, check_many
from .check.results import GemmCheck
from .config import GemmConfig
from .device import NoGpuError, gpu_available
from .handle import Handle, create_handle, math_mode
from .shapes import GemmShape

__version__ = "0.2.0"

__all__ = [
    "ComputeType", "CublasError", "GemmCheck", "GemmConfig", "GemmShape", "Handle", "MathMode", "NoGpuError",
    "check_gemm", "check_many", "create_handle", "gemm", "gpu_available", "math_mode", "prepare_gemm",
]
