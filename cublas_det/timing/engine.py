"""GPU timing of GEMM shapes in several configurations, side by side (docs/method.md says why each step):
CUDA events around a graph-captured batch replayed behind a blocking kernel (``hold``), arms in a Williams
order with an A/A arm, throttled batches redone (``rounds``), shapes timed in visits on fresh setups."""

from __future__ import annotations

import contextlib
import dataclasses
import time

from ..core.call import gemm, shape_gemm
from ..core.config import resolve_config
from ..core.device import device_properties, gpu_failures
from ..core.handle import create_handle
from ..kernels.signature import recorded_signature
from ..core.memory import WORKSPACE_BYTES
from ..core.operands import HostOperands, device_operands, output, same_seed
from .clocks import clock_mhz, default_sm_clock_mhz
from .hold import RELEASED, stream_hold
from ..results.timing import Arm, ArmTiming, ShapeTiming, aa_reference
from .rounds import THROTTLE_FRACTION, Sample
from ..results.stats import PROBE_MAX_CALLS, TARGET_HALF_WIDTH, batch_size, buffer_sets, probe_calls
from .visits import BUDGET_FLOOR_VISITS, MIN_VISITS_FOR_INTERVAL, run_visits


def warm_up(seconds: float = 1.0) -> None:
    """Sustained large GEMMs so the clocks are up before the first sample."""
    import cupy
    a = cupy.ones((4096, 4096), cupy.float32)
    out = cupy.empty_like(a)
    with create_handle("pedantic") as handle:
        deadline = time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            for _ in range(10):
                gemm(a, a, out=out, handle=handle)
            cupy.cuda.get_current_stream().synchronize()


def arms_of(configs, aa_control: bool = True) -> list[Arm]:
    """An arm per configuration (resolved), and with ``aa_control`` the A/A arm: a second handle of the
    reference configuration (DEFAULT, else PEDANTIC, else the first)."""
    arms = list(dict.fromkeys(Arm(config) for config in configs))
    return arms + [Arm(aa_reference(arms).config, control=True)] if aa_control else arms


class ShapeBench(contextlib.AbstractContextManager):
    """One shape set up for timing (a context manager): rotated operand sets, a handle per arm on one
    stream, a CUDA graph of one batch per arm, and the held launch that times a graph."""

    def __init__(self, shape, configs, *, seed: int = 0, aa_control: bool = True, operands=None):
        import cupy
        self.shape = shape
        self.stream = cupy.cuda.Stream(non_blocking=True)
        if len({config.a_type for config in configs}) > 1 or len({config.c_type for config in configs}) > 1:
            raise ValueError("time_shapes times configurations side by side on one set of operands: give "
                             "configurations of one input and one output type, not "
                             + ", ".join(sorted({f"{c.input_dtype}->{c.output_dtype}" for c in configs})))
        a, b = operands if operands is not None else device_operands(shape, seed, configs[0])
        # A, B and C at the configuration's element sizes: bf16 rotates as many sets as its bytes need
        self.sets = buffer_sets(sum(shape.operand_bytes(configs[0].a_type.itemsize, configs[0].c_type.itemsize)),
                                device_properties()["l2_cache_bytes"])
        self.buffers = [(a, b, output(shape, configs[0]))]
        self.buffers += [(a.copy(), b.copy(), output(shape, configs[0])) for _ in range(self.sets - 1)]
        cupy.cuda.get_current_stream().synchronize()  # the copies are complete before `stream` reads them
        self.names = arms_of(configs, aa_control)
        self.handles = {}
        try:
            for arm in self.names:
                workspace = arm.config.workspace_bytes
                self.handles[arm] = create_handle(arm.config, stream=self.stream,
                                                  workspace_bytes=WORKSPACE_BYTES if workspace is None else workspace)
            self.hold = stream_hold(cupy.cuda.runtime.getDevice())
        except BaseException:
            self.close()
            raise
        with self.stream:
            self._stamps = cupy.zeros((len(self.names), 2, 2), cupy.uint64)
            self._outcomes = cupy.zeros(len(self.names), cupy.uint32)
        self.graphs = {}
        self.calls = 0

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        import cupy
        # The buffers go back to the pool only once no queued work reads them; on a failed GPU nothing more runs.
        with contextlib.suppress(cupy.cuda.runtime.CUDARuntimeError):
            self.stream.synchronize()
        for handle in self.handles.values():
            handle.close()
        self.handles = {}
        self.graphs = {}
        self.buffers = []

    def eager(self, name: str, calls: int) -> None:
        """``calls`` GEMMs of arm ``name`` on the stream, rotating through the operand sets."""
        handle = self.handles[name]
        for i in range(calls):
            x, y, out = self.buffers[i % self.sets]
            shape_gemm(x, y, out, handle, self.shape)

    def capture(self, name: str, calls: int):
        with self.stream:
            self.stream.begin_capture()
            self.eager(name, calls)
            graph = self.stream.end_capture()
        graph.upload(self.stream)
        return graph

    @contextlib.contextmanager
    def _held(self, slot: int = 0):
        """What is queued on the stream inside waits behind the blocking kernel (its outcome word in slot
        ``slot``: whether it held the stream until the release) and is released at the end."""
        with self.stream:
            self.hold.hold(self._outcomes[slot:slot + 1])
            try:
                yield
            finally:
                self.hold.release()

    def held_launch(self, graph, slot: int = 0, stamps: bool = False):
        """Queue ``graph`` between two events behind the blocking kernel, release it, and return the
        (start, end) events. ``stamps``: SM 0 clock stamps outside the interval into slot ``slot``."""
        with self._held(slot):
            if stamps:
                self.hold.stamp(self._stamps[slot, 0])
            start = self.stream.record()
            graph.launch(self.stream)
            end = self.stream.record()
            if stamps:
                self.hold.stamp(self._stamps[slot, 1])
        return start, end

    def held_replays(self, name: str, replays: int) -> None:
        """``replays`` replays of arm ``name``'s batch back to back behind the blocking kernel."""
        with self._held():
            for _ in range(replays):
                self.graphs[name].launch(self.stream)

    def kernel_signatures(self, replays: int = 2) -> dict:
        """{arm: KernelSignature} of ``replays`` held replays of each arm's batch, recorded by CUPTI (untimed)."""
        return {name: recorded_signature(lambda name=name: self.held_replays(name, replays), replays * self.calls)
                for name in self.names}

    def held_seconds(self, graph) -> tuple[float, bool]:
        """Seconds one held replay of ``graph`` took, and whether the stream was held throughout."""
        import cupy
        with self.stream:
            self._outcomes[:1].fill(0)
        start, end = self.held_launch(graph)
        end.synchronize()
        return cupy.cuda.get_elapsed_time(start, end) * 1e-3, int(self._outcomes[:1].get()[0]) == RELEASED

    def calibrate(self) -> int:
        """Calls per batch, so that the fastest arm's batch lasts >= 1 ms, from graph replays (eager
        small GEMMs are host-bound): one call per arm, then unless that fills a batch, a short probe."""
        for name in self.names:  # untimed: module loading, heuristics cache
            self.eager(name, 1)
        single = min(self.held_seconds(self.capture(name, 1))[0] for name in self.names)
        probe = probe_calls(single)
        if probe == 0:
            return 1
        fastest = float("inf")
        for name in self.names:
            graph = self.capture(name, probe)
            if probe == PROBE_MAX_CALLS:  # a short GEMM: a first replay's one-time costs would weigh
                self.held_seconds(graph)
            fastest = min(fastest, self.held_seconds(graph)[0] / probe)
        return batch_size(fastest)

    def prepare(self, calls: int | None = None) -> int:
        self.calls = calls or self.calibrate()
        self.graphs = {name: self.capture(name, self.calls) for name in self.names}
        return self.calls

    def measure_round(self, order: list[str], setup: int = 0, eager: bool = True) -> dict:
        """One sample per arm in ``order``: the held graph batch, then (``eager``) the same batch eagerly
        from an idle GPU, as a step after a sync runs it; ``setup``, this setup's index, in each sample."""
        import cupy
        with self.stream:
            self._stamps.fill(0)
            self._outcomes.fill(0)
        events = []
        for slot, name in enumerate(order):
            graph_start, graph_end = self.held_launch(self.graphs[name], slot, stamps=True)
            graph_end.synchronize()
            eager_events = None
            if eager:
                with self.stream:
                    eager_start = self.stream.record()
                    self.eager(name, self.calls)
                    eager_events = eager_start, self.stream.record()
            events.append((name, graph_start, graph_end, eager_events))
        self.stream.synchronize()
        stamps = self._stamps.get().tolist()
        outcomes = self._outcomes.get().tolist()
        samples = {}
        for slot, (name, graph_start, graph_end, eager_events) in enumerate(events):
            (t0, c0), (t1, c1) = stamps[slot]
            eager_s = cupy.cuda.get_elapsed_time(*eager_events) * 1e-3 / self.calls if eager_events else None
            samples[name] = Sample(cupy.cuda.get_elapsed_time(graph_start, graph_end) * 1e-3 / self.calls, eager_s,
                                   clock_mhz(t0, c0, t1, c1), outcomes[slot] == RELEASED, setup)
        return samples


@dataclasses.dataclass
class RunTiming:
    """Each timed shape's :class:`ShapeTiming`, the shapes whose timing failed (why), and whether Ctrl-C came."""

    timings: dict  # shape name -> ShapeTiming
    errors: dict  # shape name -> "timing failed: ..."
    interrupted: bool = False


class ShapeSetups:
    """A run's setups of each shape (a :class:`ShapeBench` each) from one host copy of its operands, the batch
    size calibrated on the first setup and kept, and the seconds its setups were open."""

    def __init__(self, shapes, configs, *, seed: int, aa_control: bool, operands=None):
        self.by_name = {shape.name: shape for shape in shapes}
        self.configs, self.aa_control = configs, aa_control
        self.calls, self.sets = {}, {}
        self.open_s = dict.fromkeys(self.by_name, 0.0)
        self.operand_type = configs[0]  # one input type for every arm (ShapeBench checks)
        same_seed(operands, seed)
        self.operands = operands if operands is not None else HostOperands(seed)

    @contextlib.contextmanager
    def setup(self, key):
        shape = self.by_name[key]
        opened = time.perf_counter()
        try:
            with ShapeBench(shape, self.configs, aa_control=self.aa_control,
                            operands=self.operands.device_pair(shape, self.operand_type)) as bench:
                self.calls[key] = bench.prepare(self.calls.get(key))
                self.sets[key] = bench.sets
                yield bench
        finally:
            self.open_s[key] += time.perf_counter() - opened


def time_shapes(shapes, configs, *, seed: int = 0, min_visits: int = 4, max_visits: int = 8, budget_s: float = 1.0,
                aa_control: bool = True, monitor=None, kernels: bool = False, failures: tuple | None = None,
                on_visit=None, operands=None) -> RunTiming:
    """Time every shape in each configuration (:class:`GemmConfig`, or a mode name), side by side, in
    visits round-robin over ``shapes``, each a fresh :class:`ShapeBench` taking one Williams cycle.

    A shape takes ``min_visits`` (two at least) to ``max_visits``, stopping early when every
    ratio's interval is narrow enough or its rounds have spent ``budget_s``. ``operands``: the
    :class:`~cublas_det.core.operands.HostOperands` to upload (default: made here). ``monitor``: a
    running :class:`~.monitor.GpuMonitor`, read over the whole timing. ``kernels``: record each
    arm's kernels through CUPTI on one more setup. ``failures``: exceptions that end one shape's
    timing with a one-line reason (default: :func:`~cublas_det.core.device.gpu_failures`).
    """
    import cupy
    if len({shape.name for shape in shapes}) < len(shapes):
        raise ValueError("time_shapes: give each shape once (two shapes share a name)")
    configs = [resolve_config(config)[0] for config in configs]  # resolved once, here
    failures = gpu_failures() if failures is None else failures
    default = default_sm_clock_mhz()
    floor = THROTTLE_FRACTION * default if default else None
    min_visits = max(min_visits, MIN_VISITS_FOR_INTERVAL)  # as run_visits takes them, and as the file says
    max_visits = max(max_visits, min_visits)
    setups = ShapeSetups(shapes, configs, seed=seed, aa_control=aa_control, operands=operands)
    mark = monitor.mark() if monitor is not None else 0

    @contextlib.contextmanager
    def open_visit(key, visit):
        try:
            with setups.setup(key) as bench:
                yield bench.measure_round
        except failures:
            cupy.get_default_memory_pool().free_all_blocks()  # the next shapes get the memory back
            raise

    run = run_visits(list(setups.by_name), list(arms_of(configs, aa_control)), open_visit, min_visits=min_visits,
                     max_visits=max_visits, budget_s=budget_s, clock_floor_mhz=floor, failures=failures,
                     on_visit=on_visit, budget_floor_visits=min(BUDGET_FLOOR_VISITS, min_visits))
    activity = monitor.activity_since(mark) if monitor is not None else None
    limits = {"min_visits": min_visits, "max_visits": max_visits, "budget_s": budget_s}
    timings = {shape.name: _shape_timing(shape, run.outcomes[shape.name], setups, floor, activity, limits)
               for shape in shapes if shape.name in run.outcomes}  # in the order given, not the order they stopped
    interrupted = run.interrupted
    if kernels and not interrupted:
        try:
            for key, timing in timings.items():
                timings[key] = _with_kernels(timing, setups.setup, key, failures)
        except KeyboardInterrupt:  # the timings stand; the shapes not reached have no kernels
            interrupted = True
    return RunTiming(timings, run.errors, interrupted)


def _shape_timing(shape, outcome, setups: ShapeSetups, floor, activity, limits: dict):
    sets = setups.sets[shape.name]
    cycle = outcome.rounds.rounds // outcome.visits
    options = {"min_rounds": limits["min_visits"] * cycle, "max_rounds": limits["max_visits"] * cycle,
               **limits, "target_half_width": TARGET_HALF_WIDTH, "order": "williams", "sets": sets,
               "schedule": "visits", "visits": outcome.visits, "setups": outcome.visits, "rounds_per_visit": cycle}
    # µs per GEMM, each sample with its setup (visit), whose spread widens the arm's interval
    arms = tuple(ArmTiming(name, tuple(s.graph_s * 1e6 for s in samples),
                           tuple(s.eager_s * 1e6 for s in samples if s.eager_s is not None),
                           tuple(s.clock_mhz for s in samples), setups=tuple(s.setup for s in samples))
                 for name, samples in outcome.rounds.kept.items())
    return ShapeTiming(shape.name, shape.flop, setups.calls[shape.name], sets, outcome.rounds.rounds, arms,
                       outcome.ratios, setups.open_s[shape.name], outcome.stop_reason.value, outcome.rounds.discards,
                       floor, activity, options)


def _with_kernels(timing: ShapeTiming, setup, key, failures) -> ShapeTiming:
    """``timing`` with each arm's kernels, recorded through CUPTI on one more setup; where the GPU fails
    the recording, the timing stands and each arm says why its kernels are missing."""
    try:
        with setup(key) as bench:
            signatures = bench.kernel_signatures()
    except failures as err:
        reason = f"not recorded ({type(err).__name__}: {err})"
        return dataclasses.replace(timing, arms=tuple(dataclasses.replace(arm, kernels=reason) for arm in timing.arms))
    return dataclasses.replace(timing, arms=tuple(
        dataclasses.replace(arm, kernel_us=signatures[arm.name].kernel_us, kernels=signatures[arm.name].describe())
        if signatures.get(arm.name) else arm for arm in timing.arms))

