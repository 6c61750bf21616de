"""cublas_det: are your cuBLAS GEMMs bit-for-bit reproducible, and what does determinism cost?

Public API::

    from cublas_det import create_handle, gemm, MathMode
    with create_handle("pedantic") as handle:      # or CUBLAS_DET_MATH_MODE=pedantic
        c = gemm(a, b, handle=handle)
"""

from ._check import SCENARIOS as SCENARIOS
from ._check import GemmCheck as GemmCheck
from ._check import ScenarioResult as ScenarioResult
from ._check import check_gemm as check_gemm
from ._check import check_many as check_many
from ._cublas import CublasError as CublasError
from ._cublas import CublasNotFoundError as CublasNotFoundError
from ._device import NoGpuError as NoGpuError
from ._device import gpu_available as gpu_available
from ._device import gpu_unavailable_reason as gpu_unavailable_reason
from ._env import MATH_MODE_VAR as MATH_MODE_VAR
from ._env import fingerprint as fingerprint
from ._gemm import GemmCall as GemmCall
from ._gemm import gemm as gemm
from ._gemm import prepare_gemm as prepare_gemm
from ._handle import AtomicsMode as AtomicsMode
from ._handle import ComputeType as ComputeType
from ._handle import Handle as Handle
from ._handle import MathMode as MathMode
from ._handle import ModeSource as ModeSource
from ._handle import create_handle as create_handle
from ._handle import math_mode as math_mode
from ._handle import parse_math_mode as parse_math_mode
from ._handle import resolve_math_mode as resolve_math_mode
from .shapes import GemmShape as GemmShape
from .shapes import parse_shape as parse_shape

__version__ = "0.1.0"

__all__ = [
    "AtomicsMode", "ComputeType", "CublasError", "CublasNotFoundError", "GemmCheck", "GemmShape", "Handle",
    "MATH_MODE_VAR", "MathMode", "ModeSource", "NoGpuError", "SCENARIOS", "ScenarioResult", "check_gemm",
    "check_many", "create_handle", "fingerprint", "gemm", "GemmCall", "prepare_gemm", "gpu_available", "gpu_unavailable_reason",
    "math_mode", "parse_math_mode", "parse_shape", "resolve_math_mode",
    "__version__",
]
