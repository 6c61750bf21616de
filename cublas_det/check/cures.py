"""A cure and its judge, shared by ``prescribe`` (which makes and times cures on the GPU) and a stored run's
report (which prices the cures the run itself measured): a :class:`Cure` is verified when the hazard's
scenario gave identical bits in its configuration and its own bits repeat."""

from __future__ import annotations

import dataclasses

from ..bindings.cublas import MathMode
from ..bindings.cublaslt import ReductionScheme
from ..core.config import GemmConfig
from ..core.shapes import GemmShape
from .scenarios import REGISTRY


@dataclasses.dataclass(frozen=True)
class Cure:
    label: str  # what to do, in words
    config: GemmConfig | None  # None: a change of setup, not of the GEMM
    verified: bool
    evidence: str  # what the verification showed (why it failed, where it did)
    ratio: object = None  # timing.stats.Ratio of the cure against the configuration it replaces
    keeps_bits: bool = False  # gives the bits the configuration gives today
    introduces: tuple = ()  # hazards that change the cure's bits and not the configuration's
    untested: bool = False  # cannot be verified on this GPU (it is timed, not counted as a cure)

    def to_dict(self) -> dict:
        return {"cure": self.label, "config": self.config.to_dict() if self.config else None,
                "verified": self.verified, "untested": self.untested, "evidence": self.evidence,
                "keeps_bits": self.keeps_bits, "introduces": list(self.introduces),
                "time_ratio": None if self.ratio is None else interval(self.ratio)}


def interval(ratio) -> dict:
    return {"median": ratio.median, "ci_low": ratio.ci_low, "ci_high": ratio.ci_high}


@dataclasses.dataclass(frozen=True)
class Prescription:
    shape: GemmShape
    config: GemmConfig
    hazard: str  # the scenario that changed the bits
    cures: tuple

    @property
    def best(self) -> Cure | None:
        """The cheapest verified cure that brings in no other hazard (a setup cure at 1, an untimed one last)."""
        def cost(cure):
            ratio = 1.0 if cure.config is None else (cure.ratio.median if cure.ratio else float("inf"))
            return (bool(cure.introduces), ratio)
        return min((cure for cure in self.cures if cure.verified), key=cost, default=None)

    def to_dict(self) -> dict:
        return {"shape": self.shape.name, "config": self.config.name, "hazard": self.hazard,
                "best": self.best.label if self.best else None, "cures": [c.to_dict() for c in self.cures]}


def lt_config(config: GemmConfig, **options) -> GemmConfig:
    """``config`` through cuBLASLt (no math-mode flag: a half-precision output's DISALLOW flag becomes the
    reduction-scheme mask that keeps split-K sums in the compute type, unless a cure sets one)."""
    if config.disallow_reduced_precision_reduction and config.output_dtype != "float32":
        options.setdefault("lt_reduction_scheme_mask", int(ReductionScheme.COMPUTE_TYPE))
    return dataclasses.replace(config, api="lt", algo=-1, disallow_reduced_precision_reduction=False, **options)


def judged(label, cure, hazard, check, cure_check, introduces, targets) -> Cure:
    """A cure judged by its check under ``hazard``: identical bits there, and its own bits repeat."""
    keeps_bits = cure_check.digest == check.digest
    untestable = REGISTRY[hazard].untestable(cure) if REGISTRY[hazard].untestable else ""
    if untestable:
        return Cure(label, cure, False, untestable, keeps_bits=keeps_bits, untested=True)
    result = cure_check.scenario(hazard)
    evidence = _evidence(hazard, result, targets)
    if result and result.identical and not cure_check.reproducible:
        evidence += f"; yet its own bits did not repeat ({cure_check.verdict.value})"
    if introduces:
        evidence += f"; brings in: {', '.join(REGISTRY[h].label for h in introduces)}"
    return Cure(label, cure, bool(result and result.identical and cure_check.reproducible), evidence,
                keeps_bits=keeps_bits, introduces=introduces)


def _evidence(hazard: str, result, targets) -> str:
    if result is None or result.error:
        return f"could not run: {result.error if result else 'no result'}"
    if result.not_applicable:
        return f"does not apply: {result.not_applicable}"
    if result.identical:
        where = REGISTRY[hazard].evidence
        return f"same bits {where(result, targets) if where else ''}".strip()
    return f"bits change: {result.detail}"


def is_cure_kind(config: GemmConfig, other: GemmConfig) -> bool:
    """Whether ``other`` is a configuration of a kind :func:`candidates` tries in place of ``config``: it through
    cuBLASLt (any algorithm, split-K or SM-count plan), or in BF16X9 math (decided without a GPU)."""
    if config.api != "lt" and other.api == "lt":
        plan = dict(lt_algo=(), lt_reduction_scheme_mask=None, lt_sm_count_target=0)
        return dataclasses.replace(other, **plan) == dataclasses.replace(lt_config(config), **plan)
    return (other.math_mode is MathMode.FP32_EMULATED_BF16X9 and other != config
            and dataclasses.replace(other, math_mode=config.math_mode) == config)


def cures_in_run(check, hazard: str, others, timing=None) -> tuple:
    """The cures of ``hazard`` for ``check`` that a run already measured, judged as :func:`prescribe` judges
    them: its setup cures (the guarantee scenarios it ran), and the checks among ``others`` (its shape's)
    of a kind prescribe tries, each timed against ``check`` where ``timing`` (its shape's) holds that ratio."""
    hazards = {r.scenario for r in check.findings}
    cures = []
    for other in (c for c in others if is_cure_kind(check.config, c.config) and not c.error):
        introduces = tuple(r.scenario for r in other.findings if r.scenario not in hazards)
        cure = judged(other.config.role, other.config, hazard, check, other, introduces, ())
        ratio = timing.ratio(other.mode_name, check.mode_name) if timing else None
        cures.append(dataclasses.replace(cure, ratio=ratio))
    return tuple(cures + setup_cures(check, hazard))


def setup_cures(check, hazard: str) -> list[Cure]:
    return [Cure(label, None, r.identical, f"same bits in {r.runs} runs" if r.identical else r.detail, keeps_bits=True)
            for scenario, label in REGISTRY[hazard].setup_cures if (r := check.scenario(scenario)) and r.compared]
