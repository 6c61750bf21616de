"""cublas_det: are your cuBLAS GEMMs bit-for-bit reproducible, and what does determinism cost?

Public API::

    from cublas_det import create_handle, gemm, MathMode
    with create_handle("pedantic") as handle:      # or CUBLAS_DET_MATH_MODE=pedantic
        c = gemm(a, b, handle=handle)
"""

from ._cublas import AtomicsMode as AtomicsMode
from ._cublas import ComputeType as ComputeType
from ._cublas import CublasError as CublasError
from ._cublas import CublasNotFoundError as CublasNotFoundError
from ._cublas import MathMode as MathMode
from ._device import NoGpuError as NoGpuError
from ._device import gpu_available as gpu_available
from ._device import gpu_unavailable_reason as gpu_unavailable_reason
from ._env import MATH_MODE_VAR as MATH_MODE_VAR
from ._gemm import GemmCall as GemmCall
from ._gemm import gemm as gemm
from ._gemm import prepare_gemm as prepare_gemm
from ._gemm import shape_gemm as shape_gemm
from ._handle import Handle as Handle
from ._handle import create_handle as create_handle
from ._handle import math_mode as math_mode
from ._provenance import fingerprint as fingerprint
from .check import check_gemm as check_gemm
from .check import check_many as check_many
from .config import GemmConfig as GemmConfig
from .config import ModeSource as ModeSource
from .config import parse_math_mode as parse_math_mode
from .config import resolve_config as resolve_config
from .results import GemmCheck as GemmCheck
from .results import Kind as Kind
from .results import Reproducible as Reproducible
from .results import ScenarioResult as ScenarioResult
from .scenarios import REGISTRY as SCENARIOS
from .shapes import GemmShape as GemmShape
from .shapes import parse_shape as parse_shape

__version__ = "0.1.0"

__all__ = [
    "AtomicsMode", "ComputeType", "CublasError", "CublasNotFoundError", "GemmCall", "GemmCheck", "GemmConfig",
    "GemmShape", "Handle", "Kind", "MATH_MODE_VAR", "MathMode", "ModeSource", "NoGpuError", "Reproducible",
    "SCENARIOS", "ScenarioResult", "check_gemm", "check_many", "create_handle", "fingerprint", "gemm",
    "gpu_available", "gpu_unavailable_reason", "math_mode", "parse_math_mode", "parse_shape", "prepare_gemm",
    "resolve_config", "shape_gemm", "__version__",
]
