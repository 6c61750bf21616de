"""GPU timing of one GEMM shape in several math modes, side by side (``shared/reference/perf_method.md`` §5).

The method, and why:
- One sample = CUDA events around a *batch* of n GEMMs lasting >= 1 ms: event resolution is
  ~0.5 µs, so a single 5-µs GEMM cannot be timed alone.
- Primary number: the batch captured once in a CUDA graph and replayed, which removes Python and
  launch overhead and leaves the device cost of each mode. Secondary: the same batch launched
  eagerly from Python, what an un-graphed training step pays.
- Shapes whose operands fit in L2 rotate through several buffer sets, so a batch does not time
  a GEMM whose inputs are already in cache from the previous call.
- Modes are interleaved round by round in rotating order, and ratios are *paired* per round, so
  clock and thermal drift hit every mode alike. An A/A arm (DEFAULT on a second handle) measures
  the noise floor.
- Rounds continue until every paired ratio's 95% interval is within ±0.5% of its median, or the
  round or time budget runs out.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
import time

TARGET_BATCH_S = 1e-3
MAX_BATCH = 4000
WORKSPACE_BYTES = 32 * 2**20  # cuBLAS's recommendation for Hopper
AA_ARM = "DEFAULT-AA"


# -- statistics (pure Python; tested on synthetic samples) -------------------------------------
def quartiles(values) -> tuple[float, float, float]:
    """(q1, median, q3) with linear interpolation; a single value is all three."""
    values = sorted(values)
    if not values:
        raise ValueError("no samples")
    if len(values) == 1:
        return values[0], values[0], values[0]
    q1, q2, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, q2, q3


def median_ci(values, confidence: float = 0.95) -> tuple[float, float]:
    """Distribution-free interval for the median from order statistics (normal approximation).

    With z = 1.96, ranks j = floor(n/2 - z*sqrt(n)/2) and k = ceil(n/2 + 1 + z*sqrt(n)/2)
    (1-based, clamped to 1..n); needs no assumption about the shape of the distribution.
    """
    if confidence != 0.95:
        raise ValueError("only the 95% interval is implemented")
    values = sorted(values)
    n = len(values)
    if n == 0:
        raise ValueError("no samples")
    half = 0.98 * math.sqrt(n)
    j = max(1, math.floor(n / 2 - half))
    k = min(n, math.ceil(n / 2 + 1 + half))
    return values[j - 1], values[k - 1]


@dataclasses.dataclass(frozen=True)
class Ratio:
    """Median of per-round ratios numerator/denominator, with its 95% interval."""

    numerator: str
    denominator: str
    median: float
    ci_low: float
    ci_high: float
    rounds: int

    @property
    def half_width(self) -> float:
        """Half the interval, relative to the median."""
        return (self.ci_high - self.ci_low) / 2 / self.median if self.median else math.inf

    def __str__(self) -> str:
        return f"{self.numerator}/{self.denominator} {self.median:.3f} [{self.ci_low:.3f}, {self.ci_high:.3f}]"

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def paired_ratio(numerator: str, denominator: str, num_samples, den_samples) -> Ratio:
    """Ratio of two arms from samples taken in the same rounds (paired: drift cancels)."""
    if len(num_samples) != len(den_samples) or not num_samples:
        raise ValueError("paired samples need the same, non-zero number of rounds")
    ratios = [n / d for n, d in zip(num_samples, den_samples)]
    low, high = median_ci(ratios)
    return Ratio(numerator, denominator, statistics.median(ratios), low, high, len(ratios))


def should_stop(ratios: list[Ratio], rounds: int, elapsed_s: float, *, min_rounds: int = 10,
                max_rounds: int = 100, budget_s: float = 3.0, target_half_width: float = 0.005) -> bool:
    """Stop when every ratio is within ±target (after min_rounds), or at the round/time budget."""
    if rounds < min_rounds:
        return False
    if rounds >= max_rounds or elapsed_s >= budget_s:
        return True
    return all(r.half_width <= target_half_width for r in ratios)


def rotation(arms: list[str], round_index: int) -> list[str]:
    """The arms in the order of one round: rotated by one each round so no arm is always first."""
    shift = round_index % len(arms)
    return arms[shift:] + arms[:shift]


def batch_size(per_call_s: float, target_s: float = TARGET_BATCH_S, cap: int = MAX_BATCH) -> int:
    """Calls per batch so that a batch lasts at least ``target_s``."""
    if per_call_s <= 0:
        return cap
    return max(1, min(cap, math.ceil(target_s / per_call_s)))


def buffer_sets(footprint_bytes: int, l2_bytes: int, budget_bytes: int = 2 * 2**30) -> int:
    """Operand sets to rotate: 1 when the footprint is at least 2x L2, else ceil(3*L2/F), within budget."""
    if footprint_bytes >= 2 * l2_bytes:
        return 1
    return max(1, min(math.ceil(3 * l2_bytes / footprint_bytes), budget_bytes // footprint_bytes))


# -- results -----------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class ArmTiming:
    """Per-call microseconds of one mode, one sample per round, graph replay and eager."""

    name: str
    graph_us: tuple[float, ...]
    eager_us: tuple[float, ...]

    @property
    def median_us(self) -> float:
        return statistics.median(self.graph_us)

    @property
    def eager_median_us(self) -> float:
        return statistics.median(self.eager_us)

    @property
    def rel_iqr(self) -> float:
        q1, q2, q3 = quartiles(self.graph_us)
        return (q3 - q1) / q2 if q2 else 0.0

    def to_dict(self) -> dict:
        return {"name": self.name, "graph_us": list(self.graph_us), "eager_us": list(self.eager_us),
                "median_us": self.median_us, "eager_median_us": self.eager_median_us, "rel_iqr": self.rel_iqr}


@dataclasses.dataclass(frozen=True)
class ShapeTiming:
    """Side-by-side timing of one shape: each arm's samples and the paired ratios."""

    shape_name: str
    flop: int
    calls_per_batch: int
    buffer_sets: int
    rounds: int
    arms: tuple[ArmTiming, ...]
    ratios: tuple[Ratio, ...]
    elapsed_s: float

    def arm(self, name: str) -> ArmTiming | None:
        return next((a for a in self.arms if a.name == name), None)

    def ratio(self, numerator: str, denominator: str) -> Ratio | None:
        return next((r for r in self.ratios if (r.numerator, r.denominator) == (numerator, denominator)), None)

    def tflops(self, name: str) -> float:
        return self.flop / (self.arm(name).median_us * 1e-6) / 1e12

    def to_dict(self) -> dict:
        return {"shape": self.shape_name, "flop": self.flop, "calls_per_batch": self.calls_per_batch,
                "buffer_sets": self.buffer_sets, "rounds": self.rounds, "elapsed_s": self.elapsed_s,
                "arms": [a.to_dict() for a in self.arms], "ratios": [r.to_dict() for r in self.ratios]}


def ratio_pairs(arm_names: list[str]) -> list[tuple[str, str]]:
    """Every mode against PEDANTIC, PEDANTIC against DEFAULT, and the A/A control."""
    pairs = [(name, "PEDANTIC") for name in arm_names if name not in ("PEDANTIC", AA_ARM)]
    if "PEDANTIC" in arm_names and "DEFAULT" in arm_names:
        pairs.append(("PEDANTIC", "DEFAULT"))
    if AA_ARM in arm_names:
        pairs.append((AA_ARM, "DEFAULT"))
    return [p for p in pairs if p[1] in arm_names]


# -- the GPU part ------------------------------------------------------------------------------
def warm_up(seconds: float = 1.0) -> None:
    """Sustained large GEMMs so the clocks are up before the first sample."""
    import cupy

    from ._gemm import gemm
    from ._handle import create_handle

    a = cupy.ones((4096, 4096), cupy.float32)
    out = cupy.empty_like(a)
    with create_handle("pedantic") as handle:
        deadline = time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            for _ in range(10):
                gemm(a, a, out=out, handle=handle)
            cupy.cuda.get_current_stream().synchronize()


def time_shape(shape, configs, *, seed: int = 0, min_rounds: int = 10, max_rounds: int = 100,
               budget_s: float = 3.0, aa_control: bool = True, operands=None) -> ShapeTiming:
    """Time ``shape`` in each configuration (:class:`GemmConfig`, or a mode name), side by side.

    Arms are named by the configurations' names; the A/A control is a second DEFAULT handle.
    """
    import cupy

    from ._device import device_properties
    from ._gemm import shape_gemm
    from ._handle import create_handle
    from .config import resolve_config
    from .operands import device_operands, output

    started = time.perf_counter()
    stream = cupy.cuda.Stream(non_blocking=True)
    configs = [resolve_config(config)[0] for config in configs]
    if operands is None:
        operands = device_operands(shape, seed, configs[0])
    a, b = operands
    sets = buffer_sets(shape.footprint_bytes, device_properties()["l2_cache_bytes"])
    buffers = [(a, b, output(shape, configs[0]))]
    buffers += [(a.copy(), b.copy(), output(shape, configs[0])) for _ in range(sets - 1)]
    cupy.cuda.get_current_stream().synchronize()  # the copies are complete before `stream` reads them
    arm_configs = {config.name: config for config in configs}
    if aa_control and "DEFAULT" in arm_configs:
        arm_configs[AA_ARM] = arm_configs["DEFAULT"]
    handles = {name: create_handle(config, stream=stream, workspace_bytes=WORKSPACE_BYTES)
               for name, config in arm_configs.items()}
    try:
        with stream:
            def eager(handle, calls):
                for i in range(calls):
                    x, y, out = buffers[i % sets]
                    shape_gemm(x, y, out, handle, shape)

            for handle in handles.values():  # untimed: module loading, heuristics cache
                eager(handle, 3)
            calls = _calibrate(stream, handles, eager)
            graphs = {}
            for name, handle in handles.items():
                stream.begin_capture()
                eager(handle, calls)
                graphs[name] = stream.end_capture()
                graphs[name].upload(stream)
            names = list(handles)
            samples = {name: ([], []) for name in names}
            ratios: list[Ratio] = []
            rounds = 0
            while True:
                events = []
                for name in rotation(names, rounds):
                    graph_start = stream.record()
                    graphs[name].launch(stream)
                    graph_end = stream.record()
                    graph_end.synchronize()  # eager starts from an idle GPU, as a step after a sync would
                    eager_start = stream.record()
                    eager(handles[name], calls)
                    eager_end = stream.record()
                    events.append((name, graph_start, graph_end, eager_start, eager_end))
                stream.synchronize()
                for name, graph_start, graph_end, eager_start, eager_end in events:
                    samples[name][0].append(cupy.cuda.get_elapsed_time(graph_start, graph_end) * 1e3 / calls)
                    samples[name][1].append(cupy.cuda.get_elapsed_time(eager_start, eager_end) * 1e3 / calls)
                rounds += 1
                ratios = [paired_ratio(n, d, samples[n][0], samples[d][0]) for n, d in ratio_pairs(names)]
                if should_stop(ratios, rounds, time.perf_counter() - started, min_rounds=min_rounds,
                               max_rounds=max_rounds, budget_s=budget_s):
                    break
    finally:
        for handle in handles.values():
            handle.close()
    arms = tuple(ArmTiming(name, tuple(g), tuple(e)) for name, (g, e) in samples.items())
    return ShapeTiming(shape.name, shape.flop, calls, sets, rounds, arms, tuple(ratios),
                       time.perf_counter() - started)


def _calibrate(stream, handles, eager, probe_calls: int = 16) -> int:
    """Calls per batch from the fastest mode's graph-replay time, so every batch lasts >= 1 ms.

    A graph, not an eager loop: eager small GEMMs are host-bound, and calibrating on them would
    make the graph batches too short.
    """
    import cupy

    fastest = math.inf
    for handle in handles.values():
        stream.begin_capture()
        eager(handle, probe_calls)
        graph = stream.end_capture()
        graph.launch(stream)  # first launch uploads the graph
        start = stream.record()
        graph.launch(stream)
        end = stream.record()
        end.synchronize()
        fastest = min(fastest, cupy.cuda.get_elapsed_time(start, end) * 1e-3 / probe_calls)
    return batch_size(fastest)
