"""Side-by-side GPU timing of GEMM configurations: the statistics, the order, the round loop, the
visits of a run, the held graph launch, clock stamps, NVML monitoring and the results, one module each.

The pure modules (``stats``, ``order``, ``rounds``, ``visits``, ``results``, ``clocks``' arithmetic,
the summaries in ``monitor``) import without CuPy; ``engine`` and ``hold`` need a GPU when called.
"""

from .engine import (
    WORKSPACE_BYTES,
    RunTiming,
    ShapeBench,
    arms_of,
    time_shape,
    time_shapes,
    warm_up,
)
from .order import cycle_length, round_order, williams_rows
from .results import (
    AA_ARM,
    AA_SUFFIX,
    AA_TOLERANCE,
    ArmTiming,
    Discards,
    ShapeTiming,
    aa_name,
    aa_reference,
    is_control,
    ratio_pairs,
)
from .rounds import KeptRounds, Sample, run_rounds
from .stats import (
    MAX_BATCH,
    TARGET_BATCH_S,
    Ratio,
    StopReason,
    batch_size,
    buffer_sets,
    median_ci,
    paired_ratio,
    probe_calls,
    quartiles,
    stop_reason,
)
from .visits import VisitsRun, run_visits

__all__ = [
    "AA_ARM",
    "AA_SUFFIX",
    "AA_TOLERANCE",
    "MAX_BATCH",
    "TARGET_BATCH_S",
    "WORKSPACE_BYTES",
    "ArmTiming",
    "Discards",
    "KeptRounds",
    "Ratio",
    "RunTiming",
    "Sample",
    "ShapeBench",
    "ShapeTiming",
    "StopReason",
    "VisitsRun",
    "aa_name",
    "aa_reference",
    "arms_of",
    "batch_size",
    "buffer_sets",
    "cycle_length",
    "is_control",
    "median_ci",
    "paired_ratio",
    "probe_calls",
    "quartiles",
    "ratio_pairs",
    "round_order",
    "run_rounds",
    "run_visits",
    "stop_reason",
    "time_shape",
    "time_shapes",
    "warm_up",
    "williams_rows",
]
