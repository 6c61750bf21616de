"""What timing found for one shape: each arm's samples and clocks, the paired ratios, why it stopped,
what was discarded, and whether the A/A control lets the ratios be trusted."""

from __future__ import annotations

import dataclasses
import statistics

from ..bindings.cublas import MathMode
from ..core.config import GemmConfig, name_role
from ..base.schema import Codec
from .stats import Ratio, quartiles, widened_ci

AA_SUFFIX = "-AA"
# The A/A control fails when its whole interval lies outside 1 ± this (not "excludes 1": chance alone).
AA_TOLERANCE = 0.005


class Arm(str):
    """An arm's name, as tables, JSON and ratios show it, carrying the configuration it times and whether
    it is the A/A control (a second handle of that configuration): nothing parses the name back. A stored
    name no configuration reads back (a pinned algorithm's, a foreign one) keeps ``config`` None."""

    def __new__(cls, config: GemmConfig | None, control: bool = False, name: str | None = None):
        arm = super().__new__(cls, (config.name if config else name) + (AA_SUFFIX if control else ""))
        arm.config, arm.control = config, control
        return arm

    def __reduce__(self):
        return Arm, (self.config, self.control, None if self.config else self.base)

    @property
    def base(self) -> str:
        """The name without the A/A suffix: the arm a control repeats."""
        return self.removesuffix(AA_SUFFIX)

    @property
    def role(self) -> str:
        return self.config.role if self.config else name_role(self.base)

    @classmethod
    def read(cls, name: str, known: dict | None = None) -> Arm:
        """The arm a run file names, its configuration from ``known`` ({name: GemmConfig}) or the name."""
        base = name.removesuffix(AA_SUFFIX)
        config = (known or {}).get(base)
        if config is None:
            try:
                config = GemmConfig.parse(base, source="arm")
            except ValueError:
                return cls(None, base != name, base)  # shown and paired by its name, as the file has it
        return cls(config, base != name)


def arm_with_role(arms, mode: MathMode) -> Arm | None:
    """The (first) arm of math mode ``mode`` and nothing else but element types, algo and workspace
    (:meth:`GemmConfig.plain`), A/A controls excluded: a bf16 run finds its arms as an fp32 run does."""
    return next((a for a in arms if not a.control and a.config and a.config.plain(mode)), None)


def aa_reference(arms) -> Arm:
    """The arm the A/A control repeats: DEFAULT, else PEDANTIC, else the first arm."""
    arms = list(arms)
    return arm_with_role(arms, MathMode.DEFAULT) or arm_with_role(arms, MathMode.PEDANTIC) or arms[0]


def is_control(name: str) -> bool:
    return name.endswith(AA_SUFFIX)


def ratio_pairs(arms: list[Arm]) -> list[tuple[Arm, Arm]]:
    """Every mode against PEDANTIC (or the first mode, without one), PEDANTIC against DEFAULT, and the
    A/A control against its reference."""
    modes = [arm for arm in arms if not arm.control]
    pedantic, default = arm_with_role(modes, MathMode.PEDANTIC), arm_with_role(modes, MathMode.DEFAULT)
    reference = pedantic or (modes[0] if modes else None)  # without PEDANTIC: against the first (a prescription's)
    pairs = [(arm, reference) for arm in modes if reference and arm != reference]
    if pedantic and default:
        pairs.append((pedantic, default))
    return pairs + [(arm, mode) for arm in arms if arm.control for mode in modes if mode == arm.base]


@dataclasses.dataclass(frozen=True)
class ArmTiming:
    """Per-call microseconds of one arm, one sample per kept round (graph replay and eager), and the
    SM clock of each graph batch (None where it could not be read)."""

    name: Arm
    graph_us: tuple[float, ...]
    eager_us: tuple[float, ...]
    clock_mhz: tuple[float | None, ...] = ()
    # With --kernels: the summed kernel durations per GEMM of held graph replays, and the kernels that ran.
    kernel_us: float | None = None
    kernels: str = ""
    setups: tuple[int, ...] = ()  # the setup of each sample (empty: one setup)

    @property
    def median_us(self) -> float:
        return statistics.median(self.graph_us)

    @property
    def eager_median_us(self) -> float:
        return statistics.median(self.eager_us)

    @property
    def median_ci_us(self) -> tuple[float, float]:
        return widened_ci(self.graph_us, self.setups or None)

    @property
    def rel_iqr(self) -> float:
        q1, q2, q3 = quartiles(self.graph_us)
        return (q3 - q1) / q2 if q2 else 0.0

    @property
    def median_clock_mhz(self) -> float | None:
        known = [c for c in self.clock_mhz if c is not None]
        return statistics.median(known) if known else None

    def to_dict(self) -> dict:
        return {"name": str(self.name), "graph_us": list(self.graph_us), "eager_us": list(self.eager_us),
                "median_us": self.median_us, "eager_median_us": self.eager_median_us, "rel_iqr": self.rel_iqr,
                "median_ci_us": list(self.median_ci_us), "clock_mhz": list(self.clock_mhz),
                "median_clock_mhz": self.median_clock_mhz, "kernel_us": self.kernel_us, "kernels": self.kernels,
                "setups": list(self.setups)}


@dataclasses.dataclass(frozen=True)
class Discards(Codec):
    """Rounds redone, and rounds kept after the redo limit, by cause."""

    throttled: int = 0  # an SM clock below the floor (75% of the default clock)
    unheld: int = 0  # the blocking kernel gave up before the batch was queued: launch latency got in
    kept_throttled: int = 0
    kept_unheld: int = 0

    @property
    def redone(self) -> int:
        return self.throttled + self.unheld

    def add(self, cause: str, kept: bool) -> Discards:
        field = ("kept_" if kept else "") + cause
        return dataclasses.replace(self, **{field: getattr(self, field) + 1})


@dataclasses.dataclass(frozen=True)
class ShapeTiming:
    """Side-by-side timing of one shape: each arm's samples, the paired ratios, and how they were taken.
    Arms and ratios are found by an :class:`Arm`, a :class:`GemmConfig` or the name of either."""

    shape_name: str
    flop: int
    calls_per_batch: int
    buffer_sets: int
    rounds: int
    arms: tuple[ArmTiming, ...]
    ratios: tuple[Ratio, ...]
    elapsed_s: float
    stop_reason: str = ""  # a StopReason value
    discards: Discards = Discards()
    clock_floor_mhz: float | None = None  # batches below it were redone; None: not checked
    gpu_activity: object = None  # a monitor.GpuActivity over the timing (a shape's visits span it), None without NVML
    options: dict = dataclasses.field(default_factory=dict)  # the timing parameters used

    def arm(self, arm) -> ArmTiming | None:
        return next((a for a in self.arms if a.name == str(arm)), None)

    def ratio(self, numerator, denominator) -> Ratio | None:
        wanted = (str(numerator), str(denominator))
        return next((r for r in self.ratios if (r.numerator, r.denominator) == wanted), None)

    def arm_for(self, mode: MathMode) -> Arm | None:
        """The arm of this math mode (``MathMode.PEDANTIC`` finds ``PEDANTIC/bfloat16->bfloat16``)."""
        return arm_with_role([a.name for a in self.arms], mode)

    def ratio_for(self, numerator: MathMode, denominator: MathMode) -> Ratio | None:
        """:meth:`ratio` of the arms of these math modes (``ratio_for(MathMode.TF32, MathMode.PEDANTIC)``)."""
        num, den = self.arm_for(numerator), self.arm_for(denominator)
        return self.ratio(num, den) if num and den else None

    def tflops(self, arm) -> float:
        return self.flop / (self.arm(arm).median_us * 1e-6) / 1e12

    @property
    def control(self) -> Arm | None:
        """The A/A arm (``<reference>-AA``), if one was timed."""
        return next((a.name for a in self.arms if a.name.control), None)

    @property
    def aa_ratio(self) -> Ratio | None:
        control = self.control
        return self.ratio(control, control.base) if control else None

    @property
    def untrusted_reason(self) -> str | None:
        aa = self.aa_ratio
        if aa is None or not aa.excludes(1 - AA_TOLERANCE, 1 + AA_TOLERANCE):
            return None
        return (f"the A/A control {aa} lies outside 1 ± {AA_TOLERANCE:.1%}: one configuration timed against "
                "itself differed, so drift, order effects or another process bias this shape's ratios")

    @property
    def trusted(self) -> bool:
        return self.untrusted_reason is None

    @property
    def noise_floor(self) -> float:
        """Relative error the A/A control shows (its offset from 1 or its half-width, the larger); 0 without one."""
        aa = self.aa_ratio
        return max(abs(aa.median - 1), aa.half_width) if aa else 0.0

    @property
    def clock_range_mhz(self) -> tuple[float, float] | None:
        clocks = [a.median_clock_mhz for a in self.arms if a.median_clock_mhz is not None]
        return (min(clocks), max(clocks)) if clocks else None

    def to_dict(self) -> dict:
        return {"shape": self.shape_name, "flop": self.flop, "calls_per_batch": self.calls_per_batch,
                "buffer_sets": self.buffer_sets, "rounds": self.rounds, "elapsed_s": self.elapsed_s,
                "stop_reason": self.stop_reason, "discards": self.discards.to_dict(),
                "clock_floor_mhz": self.clock_floor_mhz, "trusted": self.trusted,
                "untrusted_reason": self.untrusted_reason, "noise_floor": self.noise_floor,
                "gpu_activity": self.gpu_activity.to_dict() if self.gpu_activity is not None else None,
                "options": self.options, "arms": [a.to_dict() for a in self.arms],
                "ratios": [r.to_dict() for r in self.ratios]}
