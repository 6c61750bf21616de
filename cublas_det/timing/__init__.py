"""Side-by-side GPU timing of GEMM configurations; docs/method.md says why each step is taken.
``engine`` runs on the GPU; ``visits`` and ``rounds`` decide apart from it what to take and when to stop.
"""

from .engine import RunTiming, ShapeBench, time_shapes, warm_up
from ..results.timing import ArmTiming, Discards, ShapeTiming
from .rounds import Sample
from ..results.stats import Ratio, StopReason

__all__ = ["ArmTiming", "Discards", "Ratio", "RunTiming", "Sample", "ShapeBench", "ShapeTiming", "StopReason",
           "time_shapes", "warm_up"]
