"""What a benchmark run measured, shape by shape, and where and when it ran."""

from __future__ import annotations

import dataclasses

from ..shapes import GemmShape


@dataclasses.dataclass(frozen=True)
class ShapeReport:
    """Everything a benchmark measured for one shape."""
    shape: GemmShape
    checks: dict  # configuration name -> GemmCheck
    timing: object = None  # ShapeTiming, or None when not timed
    error: str | None = None


@dataclasses.dataclass(frozen=True)
class BenchResult:
    """A benchmark run; ``interrupted``: Ctrl-C cut it short."""
    shapes: tuple[ShapeReport, ...]
    provenance: dict
    started: str
    wall_s: float
    version: str
    interrupted: bool = False
    seed: int | None = None  # the input seed of the run (also in each check)
    phases: dict = dataclasses.field(default_factory=dict)  # phase name -> wall seconds
