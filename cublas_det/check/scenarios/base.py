"""What a scenario is: a frozen :class:`Scenario`, and the :class:`ScenarioContext` it runs from."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

from ...bits.compare import Mismatch, RunsSummary
from ...core.config import GemmConfig
from ...core.device import gpu_failures
from ...core.handle import create_handle
from ...kernels.signature import kernel_change, recorded_signature
from ...core.operands import output
from ...core.shapes import GemmShape
from ...results.check import NO_MISMATCH, Kind, ScenarioResult

# gemm(a, b, out, handle, shape): the GEMM under test; a check can plant a fault by passing another.
GemmFunction = Callable[[Any, Any, Any, Any, GemmShape], None]


def traced(run, kernels: bool, calls: int | None = 1):
    """Run ``run()``; with ``kernels``, the :class:`KernelSignature` of its ``calls`` GEMM calls (None: all)."""
    if not kernels:
        run()
        return None
    return recorded_signature(run, calls)


@dataclasses.dataclass(frozen=True)
class ScenarioContext:
    """Everything a scenario needs for one GEMM shape in one configuration: ``reference`` is the first
    output, by ``gemm`` on ``handle``, on ``stream``, where scenarios issue their work; ``shared``: what
    a shape's configurations share (the ``modes`` matrix); ``kernels``: record kernels (:meth:`traced`)."""

    shape: GemmShape
    config: GemmConfig
    a: Any
    b: Any
    reference: Any
    handle: Any  # Handle
    stream: Any  # cupy.cuda.Stream
    repeats: int
    seed: int
    gemm: GemmFunction
    shared: dict = dataclasses.field(default_factory=dict)
    kernels: bool = False
    reference_kernels: Any = None  # KernelSignature of the reference output's call, with ``kernels``

    def traced(self, run, calls: int | None = 1):
        return traced(run, self.kernels, calls)

    def kernel_extra(self, signatures: dict, differing, **change) -> dict:
        """The ``extra`` entries for signatures by label ("66 SMs"): each signature, and for each label whose
        bits differed, the kernel change from the reference run (``change``: :func:`kernel_change`'s)."""
        if not self.kernels:
            return {}
        return {"kernels": {label: sig.to_dict() if sig else None for label, sig in signatures.items()},
                "reference_kernels": self.reference_kernels.to_dict() if self.reference_kernels else None,
                "kernel_changes": {label: kernel_change(self.reference_kernels, signatures[label], **change)
                                   for label in differing}}

    def new_handle(self, **options):
        return create_handle(self.config, **options)

    def new_output(self, rows: int | None = None):
        return output(self.shape, self.config, rows)


def guarded(make):
    """``make()``, or the GPU failure it raised (out of memory, a CUDA or cuBLAS error); a bug propagates."""
    try:
        return make()
    except gpu_failures() as err:
        import cupy
        cupy.get_default_memory_pool().free_all_blocks()
        return err


@dataclasses.dataclass(frozen=True)
class Scenario:
    """A condition under which a GEMM's bits are compared, and what a difference means; ``body(context)``
    runs it here, one ``in_worker`` in other processes."""

    name: str
    description: str  # one sentence, for --help and reports
    kind: Kind
    label: str  # a few words for tables and summaries: "batch size", "SM count"
    body: Callable[[ScenarioContext], ScenarioResult] | None = None
    in_worker: bool = False
    # A hazard's: where a cure's identical result held, from that result and the SM-count targets.
    evidence: Callable[[ScenarioResult, tuple], str] | None = None
    # A hazard's: (guarantee scenario, the setup it checks, in words): cures that change no GEMM.
    setup_cures: tuple[tuple[str, str], ...] = ()
    # A hazard's: why it cannot test a cure configuration ("" where it can).
    untestable: Callable[[GemmConfig], str] | None = None
    lock: str = ""  # its part in a lock entry: "bits" (a change refuses it), "rows" (which M), "workspace"

    def run(self, context: ScenarioContext) -> ScenarioResult:
        """Run the scenario; a GPU failure becomes a recorded error, a bug propagates."""
        result = guarded(lambda: self.body(context))
        return self.failed(f"{type(result).__name__}: {result}") if isinstance(result, BaseException) else result

    def from_runs(self, summary: RunsSummary, detail: str = "", **extra) -> ScenarioResult:
        return self.from_worst(summary.runs, summary.differing_runs, summary.worst, detail, extra)

    def from_worst(self, runs: int, differing_runs: int, worst: Mismatch = NO_MISMATCH, detail: str = "",
                   extra: dict | None = None) -> ScenarioResult:
        return ScenarioResult.from_worst(self.name, self.kind, runs, differing_runs, worst, detail, extra)

    def from_mismatches(self, mismatches: list[Mismatch], detail: str, extra: dict) -> ScenarioResult:
        """One comparison per run, summed up by :func:`worst_of`."""
        return self.from_worst(len(mismatches), sum(not m.identical for m in mismatches), worst_of(mismatches),
                               detail, extra)

    def failed(self, error: str) -> ScenarioResult:
        return ScenarioResult(self.name, self.kind, 0, 0, error=error)

    def does_not_apply(self, reason: str) -> ScenarioResult:
        return ScenarioResult(self.name, self.kind, 0, 0, not_applicable=reason)


def worst_of(mismatches: list[Mismatch]) -> Mismatch:
    """Many comparisons summed up as :class:`RunsSummary` sums up runs; NO_MISMATCH when none differs."""
    differing = [m for m in mismatches if not m.identical]
    if not differing:
        return NO_MISMATCH
    top = max(differing, key=lambda m: -1 if m.max_ulp is None else m.max_ulp)  # NaN only: below every number
    most = max(differing, key=lambda m: m.mismatched_elements)
    return dataclasses.replace(top, mismatched_elements=most.mismatched_elements, total_elements=most.total_elements,
                               nan_mismatches=most.nan_mismatches, signed_zero_mismatches=most.signed_zero_mismatches,
                               max_abs_diff=max((m.max_abs_diff for m in differing if m.max_abs_diff is not None),
                                                default=None))
