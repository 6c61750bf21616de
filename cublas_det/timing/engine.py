"""GPU timing of one GEMM shape in several configurations, side by side (``shared/reference/perf_method.md`` §5).

The method, and why:
- One sample = CUDA events around a *batch* of n GEMMs lasting >= 1 ms: event resolution is
  ~0.5 µs, so a single 5-µs GEMM cannot be timed alone.
- Primary number: the batch captured once in a CUDA graph and replayed, which removes Python and
  launch overhead and leaves the device cost of each configuration. The stream is held by a
  blocking kernel while the start event, the graph and the end event are queued (``hold``), so
  launch latency stays out of the interval: what is timed is the kernels and the gaps between
  graph nodes. Secondary: the same batch launched eagerly from Python on an idle GPU, what an
  un-graphed training step pays.
- Shapes whose operands fit in L2 rotate through several buffer sets, so a batch does not time
  a GEMM whose inputs are already in cache from the previous call.
- Arms are interleaved round by round in a Williams order (``order``) and ratios are *paired*
  per round, so drift hits every arm alike and every arm follows every other equally often. An
  A/A arm (the reference configuration on a second handle) measures the noise floor, whatever
  configurations are chosen.
- Each batch's SM clock is read from %globaltimer/clock64 stamps on SM 0; a round with a batch
  below 75% of the default clock is redone after a pause (``rounds``).
- Rounds continue until every paired ratio's 95% interval, less its between-setup term (which
  more rounds cannot shrink), is within ±0.5% of its median, or the round or time budget runs
  out; the reason is kept.
- A shape is timed on several independent *setups* (``ShapeSetups``: operand buffers, handles
  and graphs made anew), taking whole Williams cycles in turn. Each setup keeps a small bias of
  its own (0.5-1% on the H200's small GEMMs, against 0.05% between timings of one setup), so
  one setup's interval holds only what another round of that setup would give: the intervals
  add the between-setup spread (``stats.between_setups``), for the mean over setups.
"""

from __future__ import annotations

import dataclasses
import time

from ..memory import WORKSPACE_BYTES
from .clocks import clock_mhz, default_sm_clock_mhz
from .hold import RELEASED, stream_hold
from .results import ArmTiming, ShapeTiming, aa_name, aa_reference
from .rounds import THROTTLE_FRACTION, Sample, run_rounds
from .stats import (
    PROBE_MAX_CALLS,
    TARGET_HALF_WIDTH,
    batch_size,
    buffer_sets,
    probe_calls,
)

SETUPS = 4  # independent setups a shape is timed on (as many as fit): t(3) = 3.18 keeps the between-setup term usable


def warm_up(seconds: float = 1.0) -> None:
    """Sustained large GEMMs so the clocks are up before the first sample."""
    import cupy

    from .._gemm import gemm
    from .._handle import create_handle

    a = cupy.ones((4096, 4096), cupy.float32)
    out = cupy.empty_like(a)
    with create_handle("pedantic") as handle:
        deadline = time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            for _ in range(10):
                gemm(a, a, out=out, handle=handle)
            cupy.cuda.get_current_stream().synchronize()


class ShapeBench:
    """One shape set up for timing: rotated operand sets, a handle per arm on one stream, a CUDA
    graph of one batch per arm, and the held launch that times a graph. A context manager.

    Arms are named by the configurations' names; with ``aa_control`` a second handle of the
    reference configuration (DEFAULT, else PEDANTIC, else the first) is the A/A arm
    ``<reference>-AA``.
    """

    def __init__(self, shape, configs, *, seed: int = 0, aa_control: bool = True, operands=None,
                 copy_operands: bool = False):
        import cupy

        from .._device import device_properties
        from .._handle import create_handle
        from ..config import resolve_config
        from ..operands import device_operands, output

        self.shape = shape
        self.stream = cupy.cuda.Stream(non_blocking=True)
        configs = [resolve_config(config)[0] for config in configs]
        if len({config.a_type for config in configs}) > 1 or len({config.c_type for config in configs}) > 1:
            raise ValueError("time_shape times configurations side by side on one set of operands: give "
                             "configurations of one input and one output type, not "
                             + ", ".join(sorted({f"{c.input_dtype}->{c.output_dtype}" for c in configs})))
        if operands is None:
            operands = device_operands(shape, seed, configs[0])
        a, b = operands
        if copy_operands:  # a setup of its own: no buffer shared with the setup that made the operands
            a, b = a.copy(), b.copy()
        self.sets = buffer_sets(shape.footprint_bytes, device_properties()["l2_cache_bytes"])
        self.buffers = [(a, b, output(shape, configs[0]))]
        self.buffers += [(a.copy(), b.copy(), output(shape, configs[0])) for _ in range(self.sets - 1)]
        cupy.cuda.get_current_stream().synchronize()  # the copies are complete before `stream` reads them
        arm_configs = {config.name: config for config in configs}
        if aa_control:
            reference = aa_reference(arm_configs)
            arm_configs[aa_name(reference)] = arm_configs[reference]
        self.names = list(arm_configs)
        self.handles = {}
        try:
            for name, config in arm_configs.items():
                self.handles[name] = create_handle(config, stream=self.stream, workspace_bytes=WORKSPACE_BYTES)
            self.hold = stream_hold(cupy.cuda.runtime.getDevice())
        except BaseException:
            self.close()
            raise
        with self.stream:
            self._stamps = cupy.zeros((len(self.names), 2, 2), cupy.uint64)
            self._outcomes = cupy.zeros(len(self.names), cupy.uint32)
        self.graphs = {}
        self.calls = 0

    def __enter__(self) -> ShapeBench:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        for handle in self.handles.values():
            handle.close()
        self.handles = {}
        self.graphs = {}

    # -- batches -------------------------------------------------------------------------
    def eager(self, name: str, calls: int) -> None:
        """``calls`` GEMMs of arm ``name`` on the stream, rotating through the operand sets."""
        from .._gemm import shape_gemm

        handle = self.handles[name]
        for i in range(calls):
            x, y, out = self.buffers[i % self.sets]
            shape_gemm(x, y, out, handle, self.shape)

    def capture(self, name: str, calls: int):
        """A CUDA graph of ``calls`` GEMMs of arm ``name``, uploaded."""
        with self.stream:
            self.stream.begin_capture()
            self.eager(name, calls)
            graph = self.stream.end_capture()
        graph.upload(self.stream)
        return graph

    def held_launch(self, graph, slot: int = 0, stamps: bool = False):
        """Queue ``graph`` between two events behind the blocking kernel, then release it.

        Returns (start event, end event). ``stamps``: clock stamps of SM 0 before the start and
        after the end event into slot ``slot`` (outside the timed interval). Whether the kernel
        held the stream until the release lands in the slot's outcome word.
        """
        with self.stream:
            self.hold.hold(self._outcomes[slot:slot + 1])
            try:
                if stamps:
                    self.hold.stamp(self._stamps[slot, 0])
                start = self.stream.record()
                graph.launch(self.stream)
                end = self.stream.record()
                if stamps:
                    self.hold.stamp(self._stamps[slot, 1])
            finally:
                self.hold.release()
        return start, end

    def held_replays(self, name: str, replays: int) -> None:
        """Queue ``replays`` replays of arm ``name``'s batch graph behind the blocking kernel, then release
        them: back to back, as a profiler should see them (``prepare`` first)."""
        with self.stream:
            self.hold.hold(self._outcomes[:1])
            try:
                for _ in range(replays):
                    self.graphs[name].launch(self.stream)
            finally:
                self.hold.release()

    def kernel_signatures(self, replays: int = 2) -> dict:
        """{arm: KernelSignature} of ``replays`` held replays of each arm's batch graph, recorded by
        CUPTI (``prepare`` first; untimed, so the recording cannot touch the timed samples)."""
        from ..kernels.signature import recorded_signature

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

    # -- calibration and rounds ----------------------------------------------------------
    def calibrate(self) -> int:
        """Calls per batch, so that the fastest arm's batch lasts >= 1 ms.

        From graph replays, not eager loops (eager small GEMMs are host-bound and would make the
        graph batches too short). First one call per arm, which is all a long GEMM needs; then,
        unless one call already fills a batch, a probe of up to 5 calls (GEMMs of 0.2 ms or
        more) or 16 (shorter ones).
        """
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
        """Calibrate (unless ``calls`` is given) and capture every arm's batch graph."""
        self.calls = calls or self.calibrate()
        self.graphs = {name: self.capture(name, self.calls) for name in self.names}
        return self.calls

    def measure_round(self, order: list[str], setup: int = 0) -> dict:
        """One sample per arm in ``order``: the held graph batch, then the same batch eagerly from
        an idle GPU (as a step after a sync would run it). ``setup``: this setup's index, kept in
        each sample."""
        import cupy

        with self.stream:
            self._stamps.fill(0)
            self._outcomes.fill(0)
        events = []
        for slot, name in enumerate(order):
            graph_start, graph_end = self.held_launch(self.graphs[name], slot, stamps=True)
            graph_end.synchronize()
            with self.stream:
                eager_start = self.stream.record()
                self.eager(name, self.calls)
                eager_end = self.stream.record()
            events.append((name, graph_start, graph_end, eager_start, eager_end))
        self.stream.synchronize()
        stamps = self._stamps.get().tolist()
        outcomes = self._outcomes.get().tolist()
        samples = {}
        for slot, (name, graph_start, graph_end, eager_start, eager_end) in enumerate(events):
            (t0, c0), (t1, c1) = stamps[slot]
            samples[name] = Sample(cupy.cuda.get_elapsed_time(graph_start, graph_end) * 1e-3 / self.calls,
                                   cupy.cuda.get_elapsed_time(eager_start, eager_end) * 1e-3 / self.calls,
                                   clock_mhz(t0, c0, t1, c1), outcomes[slot] == RELEASED, setup)
        return samples

    @property
    def setups(self) -> int:
        return 1

    def time(self, **options) -> ShapeTiming:
        """Rounds on this one setup until the stopping rule (:func:`time_rounds`); ``prepare`` first."""
        return time_rounds(self, **options)


class ShapeSetups:
    """One shape on several independent setups (a :class:`ShapeBench` each: operand buffers, handles
    and graphs made anew, the same GEMMs per batch), timed as one: rounds take whole Williams cycles
    on each setup in turn. The first setup serves what needs only one (kernel traces, profiling).
    A context manager."""

    def __init__(self, shape, configs, *, setups: int = SETUPS, seed: int = 0, aa_control: bool = True,
                 operands=None):
        import cupy

        self.benches = [ShapeBench(shape, configs, seed=seed, aa_control=aa_control, operands=operands)]
        try:
            operands = self.benches[0].buffers[0][:2]
            for _ in range(setups - 1):
                try:
                    self.benches.append(ShapeBench(shape, configs, seed=seed, aa_control=aa_control,
                                                   operands=operands, copy_operands=True))
                except cupy.cuda.memory.OutOfMemoryError:
                    # The memory check counts one setup: a shape that fits once is timed on the setups
                    # that fit (options["setups"] says how many), not refused.
                    cupy.get_default_memory_pool().free_all_blocks()
                    break
        except BaseException:
            self.close()
            raise
        first = self.benches[0]
        self.shape, self.names, self.sets, self.stream = first.shape, first.names, first.sets, first.stream
        self.calls = 0

    def __enter__(self) -> ShapeSetups:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        for bench in self.benches:
            bench.close()

    @property
    def setups(self) -> int:
        return len(self.benches)

    @property
    def graphs(self) -> dict:
        return self.benches[0].graphs

    def prepare(self, calls: int | None = None) -> int:
        """Calibrate on the first setup (unless ``calls`` is given); capture every setup's graphs."""
        self.calls = self.benches[0].prepare(calls)
        for bench in self.benches[1:]:
            bench.prepare(self.calls)
        return self.calls

    def measure_round(self, order: list[str], setup: int = 0) -> dict:
        return self.benches[setup].measure_round(order, setup)

    def held_replays(self, name: str, replays: int) -> None:
        self.benches[0].held_replays(name, replays)

    def kernel_signatures(self, replays: int = 2) -> dict:
        return self.benches[0].kernel_signatures(replays)

    def time(self, **options) -> ShapeTiming:
        """Rounds on every setup until the stopping rule (:func:`time_rounds`); ``prepare`` first."""
        return time_rounds(self, **options)


def time_rounds(bench, *, started: float, min_rounds: int = 12, max_rounds: int = 100, budget_s: float = 3.0,
                target_half_width: float = TARGET_HALF_WIDTH, clock_floor_mhz: float | None = None,
                monitor=None, budget_from: float | None = None) -> ShapeTiming:
    """Rounds of a prepared :class:`ShapeBench` or :class:`ShapeSetups` until the stopping rule.
    ``started``: when the shape's timing began (its elapsed time counts from there);
    ``budget_from``: when the rounds' time budget began (default: ``started``)."""
    mark = monitor.mark() if monitor is not None else 0
    outcome = run_rounds(bench.names, bench.measure_round, min_rounds=min_rounds, max_rounds=max_rounds,
                         budget_s=budget_s, target_half_width=target_half_width, clock_floor_mhz=clock_floor_mhz,
                         started=started if budget_from is None else budget_from, setups=bench.setups)
    activity = monitor.activity_since(mark) if monitor is not None else None
    arms = tuple(ArmTiming(name, tuple(s.graph_s * 1e6 for s in kept), tuple(s.eager_s * 1e6 for s in kept),
                           tuple(s.clock_mhz for s in kept),
                           setups=tuple(s.setup for s in kept) if bench.setups > 1 else ())
                 for name, kept in outcome.samples.items())
    options = {"min_rounds": min_rounds, "max_rounds": max_rounds, "budget_s": budget_s,
               "target_half_width": target_half_width, "order": "williams", "sets": bench.sets,
               "setups": bench.setups}
    return ShapeTiming(bench.shape.name, bench.shape.flop, bench.calls, bench.sets, outcome.rounds, arms,
                       outcome.ratios, time.perf_counter() - started, outcome.stop_reason.value,
                       outcome.discards, clock_floor_mhz, activity, options)


def time_shape(shape, configs, *, seed: int = 0, min_rounds: int = 12, max_rounds: int = 100,
               budget_s: float = 3.0, aa_control: bool = True, operands=None, monitor=None,
               kernels: bool = False, setups: int = SETUPS) -> ShapeTiming:
    """Time ``shape`` in each configuration (:class:`GemmConfig`, or a mode name), side by side.

    Arms are named by the configurations' names, plus the A/A control ``<reference>-AA`` unless
    ``aa_control`` is off. ``monitor``: a running :class:`~.monitor.GpuMonitor`, whose readings
    while this shape ran go into the result. ``kernels``: after the timed rounds, record each
    arm's kernels through CUPTI (their summed time per GEMM goes into ``ArmTiming.kernel_us``).
    ``setups``: independent setups the rounds are spread over (:class:`ShapeSetups`).
    """
    started = time.perf_counter()
    default = default_sm_clock_mhz()
    with ShapeSetups(shape, configs, setups=setups, seed=seed, aa_control=aa_control, operands=operands) as bench:
        bench.prepare()
        timing = bench.time(started=started, min_rounds=min_rounds, max_rounds=max_rounds, budget_s=budget_s,
                            clock_floor_mhz=THROTTLE_FRACTION * default if default else None, monitor=monitor,
                            budget_from=time.perf_counter())  # the setups' making does not eat the rounds' budget
        if not kernels:
            return timing
        signatures = bench.kernel_signatures()
    arms = tuple(dataclasses.replace(arm, kernel_us=signatures[arm.name].kernel_us,
                                     kernels=signatures[arm.name].describe()) if signatures.get(arm.name) else arm
                 for arm in timing.arms)
    return dataclasses.replace(timing, arms=arms)
