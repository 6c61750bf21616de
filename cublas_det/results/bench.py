"""What a benchmark run measured (:class:`BenchResult`: a :class:`ShapeReport` per shape), the records the run
file is written from and read back into, and whether the run failed."""

from __future__ import annotations

import dataclasses

from ..bindings.cublas import MathMode
from ..core.shapes import GemmShape
from .check import GemmCheck, check_failures


@dataclasses.dataclass(frozen=True)
class ShapeReport:
    """Everything a benchmark measured for one shape."""
    shape: GemmShape
    checks: dict  # configuration name -> GemmCheck
    timing: object = None  # ShapeTiming, or None when not timed
    error: str | None = None

    def check_for(self, mode: MathMode) -> GemmCheck | None:
        """The (first) check of math mode ``mode`` and nothing else but element types, algo and workspace."""
        return next((check for check in self.checks.values() if check.config.plain(mode)), None)


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


def run_failed(result: BenchResult) -> bool:
    """Exit 1: a guarantee failed or could not be checked (scenario, GEMM or timing); a hazard never fails a run."""
    return any(r.error or any(check_failures(check) for check in r.checks.values()) for r in result.shapes)
