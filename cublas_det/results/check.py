"""What a check found (frozen facts), and the verdict words every report judges it in: *reproducible*
on **guarantee** scenarios only; **hazards** that change bits are *findings*, never "not reproducible";
the **comparison** of math modes gives equivalence groups."""

from __future__ import annotations

import dataclasses
import enum
from typing import ClassVar

from ..bits.streams import Mismatch
from ..core.config import GemmConfig
from ..core.shapes import GemmShape
from ..base.schema import Codec


class Kind(str, enum.Enum):
    """What a scenario's differing bits mean."""

    GUARANTEE = "guarantee"  # cuBLAS documents identical bits: other bits fail the check
    HAZARD = "hazard"  # a condition known to change bits: other bits are a finding
    COMPARISON = "comparison"  # other configurations compared: groups, no verdict


class Outcome(str, enum.Enum):
    """What one scenario saw."""

    IDENTICAL = "identical"
    DIFFER = "bits differ"
    ERROR = "error"
    NOT_APPLICABLE = "not applicable"
    NOTHING_COMPARED = "nothing compared"  # no run (a worker's placeholder, modes of one configuration)


class Reproducible(str, enum.Enum):
    """The verdict on a GEMM, from its guarantee scenarios alone."""

    YES = "yes"
    NO = "NO"
    NOT_CHECKED = "not checked"
    ERROR = "error"


NO_MISMATCH = Mismatch(0, 0)  # the starting "worst" of a scenario with several comparisons


@dataclasses.dataclass(frozen=True)
class ScenarioResult(Codec):
    """What one scenario saw; the mismatch fields are :class:`Mismatch`'s (:meth:`from_worst`), 0 where a
    scenario has no element facts (an error, digests only)."""

    scenario: str
    kind: Kind
    runs: int
    differing_runs: int
    mismatched_elements: int = 0  # in the run with the most of them
    total_elements: int = 0  # of that run
    max_abs_diff: float | None = 0.0  # over every mismatched pair without NaN of every run
    max_ulp: int | None = 0
    index: tuple[int, ...] | None = None  # (row, column) of the worst element
    reference_value: float | None = None
    actual_value: float | None = None
    detail: str = ""
    extra: dict = dataclasses.field(default_factory=dict)
    error: str | None = None  # the scenario could not run (out of memory, a worker crashed ...)
    not_applicable: str | None = None  # why the scenario does not apply to this GEMM
    nan_mismatches: int = 0  # this and the next: of the run with the most mismatched elements
    signed_zero_mismatches: int = 0

    DECODE: ClassVar[dict] = {"index": lambda index: None if index is None else tuple(index)}

    def __post_init__(self):
        object.__setattr__(self, "kind", Kind(self.kind))

    @property
    def outcome(self) -> Outcome:
        if self.error:
            return Outcome.ERROR
        if self.not_applicable:
            return Outcome.NOT_APPLICABLE
        if not self.runs:
            return Outcome.NOTHING_COMPARED
        return Outcome.DIFFER if self.differing_runs else Outcome.IDENTICAL

    @property
    def identical(self) -> bool:
        return self.outcome is Outcome.IDENTICAL

    @property
    def changed_bits(self) -> bool:
        return self.outcome is Outcome.DIFFER

    @property
    def compared(self) -> bool:
        return self.outcome in (Outcome.IDENTICAL, Outcome.DIFFER)

    def __str__(self) -> str:
        where = f" at {self.index}" if self.index is not None else ""
        ulp = "NaN only" if self.max_ulp is None else f"{self.max_ulp} ULP"
        nans = f" ({self.nan_mismatches} with NaN)" if self.nan_mismatches else ""
        text = {Outcome.ERROR: f"error: {self.error}", Outcome.NOT_APPLICABLE: f"not applicable: {self.not_applicable}",
                Outcome.NOTHING_COMPARED: "nothing compared" + (f" ({self.detail})" if self.detail else ""),
                Outcome.IDENTICAL: f"identical in {self.runs} runs",
                Outcome.DIFFER: f"{self.differing_runs}/{self.runs} runs differ, up to {self.mismatched_elements} "
                                f"elements{nans}, {ulp}{where}"}
        return f"{self.scenario}: {text[self.outcome]}"

    def to_dict(self) -> dict:
        return {**super().to_dict(), "outcome": self.outcome.value, "identical": self.identical}

    @classmethod
    def from_worst(cls, scenario: str, kind: Kind, runs: int, differing_runs: int, worst: Mismatch,
                   detail: str = "", extra: dict | None = None) -> ScenarioResult:
        return cls(scenario, kind, runs, differing_runs, **vars(worst), detail=detail,
                   extra=extra if extra is not None else {})


@dataclasses.dataclass(frozen=True)
class CallKernels:
    """The kernels one GEMM call ran: ``KernelSignature.to_dict``'s record, kept whole to read back as written."""

    launches: tuple[str, ...]  # each kernel with its grid: "splitKreduce_kernel grid 2x8x1"
    brief: str  # a few words for a table cell: "SIMT 64x64, split-K 64 + reduce"
    record: dict

    def describe(self) -> str:
        return " + ".join(self.launches) or "no kernel"

    def to_dict(self) -> dict:
        return dict(self.record)

    @classmethod
    def from_dict(cls, data: dict) -> CallKernels:
        launches = tuple(f"{k['name']} grid {'x'.join(map(str, k['grid']))}" for k in data["launches"])
        return cls(launches, data["brief"], data)


@dataclasses.dataclass(frozen=True)
class GemmCheck:
    """One GEMM shape in one configuration: its digest, accuracy and each scenario."""

    shape: GemmShape
    config: GemmConfig
    mode_source: str
    seed: int
    digest: str  # sha256 of the first output's bytes; "" when it could not be computed
    rel_error: float  # max|C - C64| / max|C64| against a float64 reference
    scenarios: tuple[ScenarioResult, ...]
    provenance: dict = dataclasses.field(default_factory=dict)
    elapsed_s: float = 0.0
    error: str | None = None  # the GEMM itself could not be computed (operands, reference)
    input_digests: dict = dataclasses.field(default_factory=dict)  # sha256 of A's and B's bytes
    kernels: CallKernels | None = None  # the reference call's kernels, when they were recorded

    @property
    def mode_name(self) -> str:
        return self.config.name

    def of_kind(self, kind: Kind) -> tuple[ScenarioResult, ...]:
        return tuple(r for r in self.scenarios if r.kind is kind)

    @property
    def verdict(self) -> Reproducible:
        guarantees = [r for r in self.of_kind(Kind.GUARANTEE) if r.compared or r.error]
        if any(r.changed_bits for r in guarantees):
            return Reproducible.NO
        if self.error or any(r.error for r in guarantees):
            return Reproducible.ERROR
        if not guarantees:
            return Reproducible.NOT_CHECKED
        return Reproducible.YES

    @property
    def reproducible(self) -> bool:
        return self.verdict is Reproducible.YES

    @property
    def guarantee_failures(self) -> tuple[ScenarioResult, ...]:
        return tuple(r for r in self.of_kind(Kind.GUARANTEE) if r.changed_bits)

    @property
    def findings(self) -> tuple[ScenarioResult, ...]:
        return tuple(r for r in self.of_kind(Kind.HAZARD) if r.changed_bits)

    @property
    def errors(self) -> tuple[ScenarioResult, ...]:
        return tuple(r for r in self.scenarios if r.error)

    def scenario(self, name: str) -> ScenarioResult | None:
        return next((result for result in self.scenarios if result.scenario == name), None)

    def __str__(self) -> str:
        verdict = self.verdict
        text = f"{self.shape} {self.mode_name}: reproducible: {verdict.value}"
        if verdict is Reproducible.NO:
            text += " (" + "; ".join(str(r) for r in self.guarantee_failures) + ")"
        elif verdict is Reproducible.ERROR:
            text += " (" + (self.error or "; ".join(str(r) for r in self.errors if r.kind is Kind.GUARANTEE)) + ")"
        if self.findings:
            text += "; bits changed under the hazards " + ", ".join(r.scenario for r in self.findings)
        if self.rel_error == self.rel_error:  # not NaN
            text += f" (rel. error {self.rel_error:.1e})"
        return text

    def to_dict(self) -> dict:
        """The check as JSON: the fields its run-file entry stores (same values), with its shape, seed,
        provenance and time."""
        return {
            "shape": self.shape.to_dict(), "config": self.config.to_dict(), "mode": self.mode_name,
            "mode_source": self.mode_source, "seed": self.seed, "digest": self.digest,
            "rel_error": self.rel_error, "reproducible": self.verdict.value,
            "findings": [r.scenario for r in self.findings],
            "scenarios": [result.to_dict() for result in self.scenarios],
            "provenance": self.provenance, "elapsed_s": self.elapsed_s, "error": self.error,
            "input_digests": self.input_digests, "kernels": self.kernels.to_dict() if self.kernels else None,
        }


def modes_group(check: GemmCheck | None) -> list[str] | None:
    """The configurations that gave this one's bits (itself excluded), or None when ``modes`` did not run."""
    result = check.scenario("modes") if check else None
    if result is None or not result.compared or "groups" not in result.extra:
        return None
    if "same_bits_as" in result.extra:  # compared with this configuration's own output
        return list(result.extra["same_bits_as"])
    for group in result.extra["groups"]:  # files of earlier versions: by the groups of modes
        if check.mode_name in group:
            return [name for name in group if name != check.mode_name]
    return []


def check_failures(check: GemmCheck) -> list[str]:
    """What fails the run (exit 1): a guarantee that gave other bits or could not run, or a GEMM that could
    not be computed; a hazard or comparison that could not run is reported, not failed."""
    failed = [r.scenario for r in check.guarantee_failures]
    failed += [r.scenario for r in check.errors if r.kind is Kind.GUARANTEE]
    return list(dict.fromkeys(failed)) or (["reference"] if check.error else [])
