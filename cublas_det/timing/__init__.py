"""Side-by-side GPU timing of GEMM configurations; docs/method.md says why each step is taken.

``engine`` runs a run's visits on the GPU; ``visits`` and ``rounds`` decide, apart from the GPU,
what to take and when to stop; ``order`` (the Williams design), ``stats`` (intervals, paired ratios),
``results``, ``hold`` (the held launch), ``clocks`` and ``monitor`` (NVML) one concept each.
"""

from .engine import RunTiming, ShapeBench, time_shape, time_shapes, warm_up
from .results import ArmTiming, Discards, ShapeTiming
from .rounds import Sample, run_rounds
from .stats import Ratio, StopReason

__all__ = ["ArmTiming", "Discards", "Ratio", "RunTiming", "Sample", "ShapeBench", "ShapeTiming", "StopReason",
           "run_rounds", "time_shape", "time_shapes", "warm_up"]
