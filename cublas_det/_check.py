"""``check_gemm()``: do a GEMM's output bits repeat, and under which conditions do they stop?

Measures only: a ``GemmCheck`` records what happened in each scenario and never raises on a
mismatch (``cublas_det.testing`` and the CLI judge). Inputs are seeded random normal float32
made on the host with numpy, so digests compare across processes and machines.
"""

from __future__ import annotations

import dataclasses
import os
import time

from . import _compare
from ._handle import ComputeType, MathMode, ModeSource, create_handle, math_mode_name, resolve_math_mode
from ._worker import INTERRUPTED, collect, kill_all, spawn
from .shapes import GemmShape, parse_shape

# name -> (one-sentence description, whether cuBLAS documents bit-identical results under it)
SCENARIOS: dict[str, tuple[str, bool]] = {
    "repeat": ("one handle on one stream runs the GEMM N times; every output is compared with the first", True),
    "fresh-handle": ("a new cuBLAS handle for every run, on the same stream", True),
    "fresh-process": ("separate Python processes compute the GEMM and their output digests are compared", True),
    "streams-shared-handle": ("one handle issues the GEMM on 4 concurrent streams (the hazard cuBLAS documents)", False),
    "streams-per-handle": ("one handle per stream on 4 concurrent streams (the remedy cuBLAS documents)", True),
    "workspace-config": ("the shared-handle case again in a process started with CUBLAS_WORKSPACE_CONFIG=:4096:8", True),
    "batch-invariance": ("rows of op(A)[:m] @ op(B) against the same rows of the full product, m = 1, 2, 4, ...", False),
    "sm-count": ("cublasSetSmCountTarget below the device's SM count, as on a GPU with fewer SMs", False),
    "modes": ("which math modes give identical bits, and the math-mode x compute-type matrix", False),
}
DEFAULT_SCENARIOS = ("repeat", "fresh-handle")
PROCESS_SCENARIOS = ("fresh-process", "workspace-config")
STREAMS = 4
FRESH_PROCESSES = 2
WORKSPACE_CONFIG = ":4096:8"
MODES = (MathMode.PEDANTIC, MathMode.DEFAULT, MathMode.TF32)
MATRIX_COMPUTE_TYPES = (ComputeType.COMPUTE_32F, ComputeType.COMPUTE_32F_PEDANTIC, ComputeType.COMPUTE_32F_FAST_TF32)
_NO_MISMATCH = _compare.Mismatch(0, 0, 0.0, 0, None)  # the starting "worst" of a scenario with several comparisons


@dataclasses.dataclass(frozen=True)
class ScenarioResult:
    """What one scenario saw. ``differing_runs == 0`` means every output matched bit for bit."""

    scenario: str
    runs: int
    differing_runs: int
    mismatched_elements: int = 0  # in the worst run
    total_elements: int = 0
    max_abs_diff: float = 0.0
    max_ulp: int = 0
    index: tuple[int, ...] | None = None  # (row, column) of the greatest ULP distance
    reference_value: float | None = None
    actual_value: float | None = None
    detail: str = ""
    extra: dict = dataclasses.field(default_factory=dict)
    error: str | None = None  # the scenario could not run (out of memory, a worker crashed ...)

    @property
    def identical(self) -> bool:
        return self.error is None and self.differing_runs == 0

    @property
    def guaranteed(self) -> bool:
        """cuBLAS documents bit-identical results under this scenario."""
        return SCENARIOS.get(self.scenario, ("", False))[1]

    def __str__(self) -> str:
        if self.error:
            return f"{self.scenario}: error: {self.error}"
        if self.identical:
            return f"{self.scenario}: identical in {self.runs} runs"
        where = f" at {self.index}" if self.index is not None else ""
        return (f"{self.scenario}: {self.differing_runs}/{self.runs} runs differ, up to "
                f"{self.mismatched_elements} elements, {self.max_ulp} ULP{where}")

    def to_dict(self) -> dict:
        data = dataclasses.asdict(self)
        data["index"] = list(self.index) if self.index is not None else None
        data["identical"] = self.identical
        data["guaranteed"] = self.guaranteed
        return data

    @classmethod
    def from_dict(cls, data: dict) -> ScenarioResult:
        fields = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in fields}
        if values.get("index") is not None:
            values["index"] = tuple(values["index"])
        return cls(**values)

    @classmethod
    def from_worst(cls, scenario: str, runs: int, differing_runs: int, worst: _compare.Mismatch, detail: str = "",
                   extra: dict | None = None) -> ScenarioResult:
        """A result whose element counts, differences and location are those of ``worst``."""
        return cls(scenario, runs, differing_runs, worst.mismatched_elements, worst.total_elements,
                   worst.max_abs_diff, worst.max_ulp, worst.index, worst.reference_value, worst.actual_value,
                   detail, extra if extra is not None else {})

    @classmethod
    def from_runs(cls, scenario: str, summary: _compare.RunsSummary, detail: str = "", **extra) -> ScenarioResult:
        return cls.from_worst(scenario, summary.runs, summary.differing_runs, summary.worst, detail, extra)


@dataclasses.dataclass(frozen=True)
class GemmCheck:
    """Facts about one GEMM shape in one math mode: its digest, accuracy and each scenario."""

    shape: GemmShape
    mode: int
    mode_source: str
    seed: int
    digest: str  # sha256 of the first output's bytes
    rel_error: float  # max|C - C64| / max|C64| against a float64 reference
    scenarios: tuple[ScenarioResult, ...]
    provenance: dict = dataclasses.field(default_factory=dict)
    elapsed_s: float = 0.0

    @property
    def mode_name(self) -> str:
        return math_mode_name(self.mode)

    @property
    def reproducible(self) -> bool:
        """Every scenario gave identical bits."""
        return all(result.identical for result in self.scenarios)

    @property
    def failures(self) -> tuple[ScenarioResult, ...]:
        return tuple(result for result in self.scenarios if not result.identical)

    def scenario(self, name: str) -> ScenarioResult | None:
        return next((result for result in self.scenarios if result.scenario == name), None)

    def __str__(self) -> str:
        verdict = "reproducible" if self.reproducible else "NOT reproducible: " + "; ".join(
            str(result) for result in self.failures)
        return f"{self.shape} {self.mode_name}: {verdict} (rel. error {self.rel_error:.1e})"

    def to_dict(self) -> dict:
        return {
            "shape": self.shape.to_dict(), "mode": self.mode_name, "mode_value": self.mode,
            "mode_source": self.mode_source, "seed": self.seed, "digest": self.digest,
            "rel_error": self.rel_error, "reproducible": self.reproducible,
            "scenarios": [result.to_dict() for result in self.scenarios],
            "provenance": self.provenance, "elapsed_s": self.elapsed_s,
        }


def validate_scenarios(scenarios) -> tuple[str, ...]:
    """Return the scenarios as a tuple; raise ValueError naming any unknown one and the choices."""
    if isinstance(scenarios, str):
        scenarios = (scenarios,)
    unknown = [name for name in scenarios if name not in SCENARIOS]
    if unknown:
        raise ValueError(f"unknown scenario {', '.join(map(repr, unknown))}; choose from {', '.join(SCENARIOS)}")
    return tuple(dict.fromkeys(scenarios))


def host_operands(shape: GemmShape, seed: int):
    """Seeded random normal float32 A and B in their stored layouts (never zeros: they hide rounding)."""
    import numpy

    rng = numpy.random.default_rng(seed)
    return (rng.standard_normal(shape.a_shape, dtype=numpy.float32),
            rng.standard_normal(shape.b_shape, dtype=numpy.float32))


def cublas_gemm(a, b, out, handle, shape: GemmShape, compute_type=None) -> None:
    """The GEMM under test: ``cublas_det.gemm`` in the handle's mode. ``gemm_fn`` arguments mimic it."""
    from ._gemm import gemm

    gemm(a, b, out=out, handle=handle, trans_a=shape.trans_a, trans_b=shape.trans_b, compute_type=compute_type)


def check_gemm(shape: GemmShape | str, mode: MathMode | int | str | None = None, *, repeats: int = 20,
               scenarios=DEFAULT_SCENARIOS, seed: int = 0, gemm_fn=None) -> GemmCheck:
    """Run ``shape`` in ``mode`` under each scenario and report what repeated and what did not.

    Args:
        shape: a :class:`GemmShape` or a string such as ``"128x56x4096:nt"``.
        mode: math mode (argument > ``CUBLAS_DET_MATH_MODE`` > PEDANTIC).
        repeats: runs per scenario (``repeat``; streams scenarios run ``max(repeats, 16)`` outputs).
        scenarios: names from :data:`SCENARIOS`.
        seed: input seed; the same seed gives the same inputs on every machine.
        gemm_fn: ``gemm_fn(a, b, out, handle, shape)`` replacing the cuBLAS call (to plant faults).

    Returns:
        A :class:`GemmCheck`; it never raises because bits differ.
    """
    return check_many([shape], [mode], repeats=repeats, scenarios=scenarios, seed=seed, gemm_fn=gemm_fn)[0]


class CheckInterrupted(KeyboardInterrupt):
    """Ctrl-C during :func:`check_many`; ``.checks`` holds the checks that had completed."""

    def __init__(self, checks: list):
        super().__init__("interrupted")
        self.checks = checks


def check_many(shapes, modes, *, repeats: int = 20, scenarios=DEFAULT_SCENARIOS, seed: int = 0,
               gemm_fn=None, on_check=None, device_id: int | None = None) -> list[GemmCheck]:
    """:func:`check_gemm` over shapes x modes, sharing inputs and the per-process scenarios.

    Worker processes (``fresh-process``, ``workspace-config``) start once for all pairs and run
    while this process works. ``on_check(check)`` is called as each in-process check completes
    (process scenarios still pending). A shape that fails (out of memory, say) is returned with
    the error recorded in its scenarios, and the others go on.

    Raises:
        CheckInterrupted: on Ctrl-C, carrying the checks completed so far.
    """
    import cupy

    from ._device import require_gpu
    from ._env import fingerprint

    scenarios = validate_scenarios(scenarios)
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 2:
        raise ValueError(f"repeats must be an int >= 2, not {repeats!r}")
    shapes = [parse_shape(s) if isinstance(s, str) else s for s in shapes]
    resolved = [resolve_math_mode(mode) for mode in modes]
    require_gpu()
    if device_id is not None:
        cupy.cuda.Device(device_id).use()
    provenance = fingerprint()
    workers = _start_workers(shapes, resolved, scenarios, repeats, seed, gemm_fn)
    checks = []
    try:
        for shape in shapes:
            try:
                operands = _device_operands(shape, seed)
            except Exception as err:  # out of memory: record it, keep going
                operands = err
            modes_result = None
            for mode_value, source in resolved:
                started = time.perf_counter()
                if isinstance(operands, Exception):
                    check = _failed_check(shape, mode_value, source, seed, scenarios, operands, provenance)
                else:
                    if "modes" in scenarios and modes_result is None:
                        modes_result = _guard("modes", lambda: _modes_matrix(shape, *operands))
                    check = _check_one(shape, mode_value, source, seed, scenarios, repeats, operands,
                                       gemm_fn, modes_result, provenance)
                check = dataclasses.replace(check, elapsed_s=time.perf_counter() - started)
                checks.append(check)
                if on_check is not None:
                    on_check(check)
            del operands
            cupy.get_default_memory_pool().free_all_blocks()
        checks = _merge_worker_results(checks, workers)
    except KeyboardInterrupt:
        kill_all(workers)
        raise CheckInterrupted(_merge_worker_results(checks, {
            name: INTERRUPTED for name in workers})) from None
    finally:
        kill_all(workers)
    return checks


# -- one shape, one mode -----------------------------------------------------------------------
def _device_operands(shape: GemmShape, seed: int):
    """A and B on the device, complete: safe to read from any stream once this returns."""
    import cupy

    a_host, b_host = host_operands(shape, seed)
    operands = cupy.asarray(a_host), cupy.asarray(b_host)
    # The copies run on the current stream (usually the legacy default stream), which the checks'
    # non-blocking streams do not wait for, and CUDA lets a copy from pageable memory return before
    # its DMA has landed. Without this wait a check's first GEMM read a partly copied operand on the
    # H200: the workspace-config worker's reference for a 210 MiB A differed in 2 of 2 runs, each
    # time with other bits, and in 0 of 2 runs with the wait.
    cupy.cuda.get_current_stream().synchronize()
    return operands


def _fp64_reference(shape: GemmShape, a, b):
    a64 = a.astype("float64")
    b64 = b.astype("float64")
    return (a64.T if shape.trans_a else a64) @ (b64.T if shape.trans_b else b64)


def _check_one(shape, mode_value, source, seed, scenarios, repeats, operands, gemm_fn, modes_result,
               provenance) -> GemmCheck:
    import cupy

    a, b = operands
    run = gemm_fn or cublas_gemm
    stream = cupy.cuda.Stream(non_blocking=True)
    handle = create_handle(mode_value, stream=stream)
    try:
        with stream:
            reference = cupy.empty((shape.m, shape.n), cupy.float32)
            run(a, b, reference, handle, shape)
            digest = _compare.digest(reference)
            rel_error = _compare.relative_error(reference, _fp64_reference(shape, a, b))
            results = []
            for name in scenarios:
                if name in PROCESS_SCENARIOS:
                    results.append(ScenarioResult(name, 0, 0, detail="pending"))  # filled by the workers
                elif name == "modes":
                    results.append(_modes_for(modes_result, mode_value))
                else:
                    scenario = _SCENARIO_FUNCTIONS[name]
                    results.append(_guard(name, lambda: scenario(shape, mode_value, a, b, reference, handle,
                                                                 stream, run, repeats)))
    finally:
        handle.close()
    return GemmCheck(shape, mode_value, ModeSource(source).value, seed, digest, rel_error, tuple(results),
                     provenance)


def _guard(name: str, body) -> ScenarioResult:
    """Run a scenario; an exception (out of memory, a cuBLAS error) becomes a recorded error."""
    try:
        return body()
    except Exception as err:
        import cupy

        cupy.get_default_memory_pool().free_all_blocks()
        return ScenarioResult(name, 0, 0, error=f"{type(err).__name__}: {err}")


def _failed_check(shape, mode_value, source, seed, scenarios, error, provenance) -> GemmCheck:
    message = f"{type(error).__name__}: {error}"
    results = tuple(ScenarioResult(name, 0, 0, error=message) for name in scenarios)
    return GemmCheck(shape, mode_value, ModeSource(source).value, seed, "", float("nan"), results, provenance)


# -- in-process scenarios --------------------------------------------------------------------------
def _scenario_repeat(shape, mode_value, a, b, reference, handle, stream, run, repeats) -> ScenarioResult:
    import cupy

    out = cupy.empty_like(reference)
    tracker = _compare.MismatchTracker(reference, repeats - 1)
    for _ in range(repeats - 1):
        run(a, b, out, handle, shape)
        tracker.record(out)
    summary = tracker.summary()
    return ScenarioResult.from_runs("repeat", _with_first(summary), "runs after the first, compared with it")


def _with_first(summary: _compare.RunsSummary) -> _compare.RunsSummary:
    """Count the reference run itself among the runs (N runs = reference + N-1 compared)."""
    return dataclasses.replace(summary, runs=summary.runs + 1)


def _scenario_fresh_handle(shape, mode_value, a, b, reference, handle, stream, run, repeats) -> ScenarioResult:
    import cupy

    runs = max(2, min(repeats, 10))  # cublasCreate/Destroy synchronize the device: keep it short
    out = cupy.empty_like(reference)
    tracker = _compare.MismatchTracker(reference, runs)
    for _ in range(runs):
        with create_handle(mode_value, stream=stream) as fresh:
            run(a, b, out, fresh, shape)
            tracker.record(out)
    return ScenarioResult.from_runs("fresh-handle", tracker.summary(), f"{runs} handles, one run each")


def _concurrent_streams(shape, mode_value, a, b, reference, stream, run, repeats, shared: bool):
    """Issue the GEMM on STREAMS streams at once, round after round, comparing every output."""
    import cupy

    rounds = max(4, -(-max(repeats, 16) // STREAMS))
    streams = [cupy.cuda.Stream(non_blocking=True) for _ in range(STREAMS)]
    outs = [cupy.empty_like(reference) for _ in range(STREAMS)]
    tracker = _compare.MismatchTracker(reference, rounds * STREAMS)
    if shared:
        one = create_handle(mode_value)  # cuBLAS's default workspace pool, shared by the streams
        handles = [one] * STREAMS
    else:
        handles = [create_handle(mode_value, stream=s) for s in streams]
    try:
        compared = stream.record()
        for _ in range(rounds):
            done = []
            for s, h, out in zip(streams, handles, outs):
                s.wait_event(compared)  # do not overwrite an output before it was compared
                if shared:
                    h.set_stream(s)
                run(a, b, out, h, shape)
                done.append(s.record())
            for event, out in zip(done, outs):
                stream.wait_event(event)
                tracker.record(out)
            compared = stream.record()
        stream.synchronize()
    finally:
        for h in set(handles):
            h.close()
    return tracker.summary(), rounds


def _scenario_streams_shared(shape, mode_value, a, b, reference, handle, stream, run, repeats) -> ScenarioResult:
    summary, rounds = _concurrent_streams(shape, mode_value, a, b, reference, stream, run, repeats, True)
    return ScenarioResult.from_runs("streams-shared-handle", summary,
                                    f"{rounds} rounds x {STREAMS} streams on one handle")


def _scenario_streams_per_handle(shape, mode_value, a, b, reference, handle, stream, run, repeats) -> ScenarioResult:
    summary, rounds = _concurrent_streams(shape, mode_value, a, b, reference, stream, run, repeats, False)
    return ScenarioResult.from_runs("streams-per-handle", summary,
                                    f"{rounds} rounds x {STREAMS} streams, one handle each")


def batch_ladder(m: int) -> list[int]:
    """Row counts to slice: 1, 2, 4, ... below M, and M - 1 (at most 14 values)."""
    ladder = []
    rows = 1
    while rows < m and len(ladder) < 13:
        ladder.append(rows)
        rows *= 2
    if m - 1 > 0 and m - 1 not in ladder:
        ladder.append(m - 1)
    return ladder


def _scenario_batch_invariance(shape, mode_value, a, b, reference, handle, stream, run, repeats) -> ScenarioResult:
    import cupy

    differing, worst, per_m = [], None, {}
    ladder = batch_ladder(shape.m)
    for rows in ladder:
        sliced = dataclasses.replace(shape, m=rows)
        a_rows = cupy.ascontiguousarray(a[:, :rows] if shape.trans_a else a[:rows])
        out = cupy.empty((rows, shape.n), cupy.float32)
        run(a_rows, b, out, handle, sliced)
        mismatch = _compare.compare(reference[:rows], out)
        per_m[rows] = mismatch.mismatched_elements
        if not mismatch.identical:
            differing.append(rows)
            if worst is None or mismatch.max_ulp > worst.max_ulp:
                worst = mismatch
    worst = worst or _NO_MISMATCH
    detail = (f"m in {ladder}: bits differ for m = {differing}" if differing
              else f"m in {ladder}: every row identical to the full product")
    return ScenarioResult.from_worst("batch-invariance", len(ladder), len(differing), worst, detail,
                                     {"mismatched_by_m": per_m})


def sm_count_targets(sm_count: int) -> list[int]:
    """SM counts to emulate: half the device, and one SM in eight fewer."""
    return sorted({max(1, sm_count // 2), max(1, sm_count - sm_count // 8)} - {sm_count})


def _scenario_sm_count(shape, mode_value, a, b, reference, handle, stream, run, repeats) -> ScenarioResult:
    import cupy

    from ._device import device_properties

    sm_count = device_properties()["sm_count"]
    targets = sm_count_targets(sm_count)
    out = cupy.empty_like(reference)
    per_target, differing, worst = {}, 0, _NO_MISMATCH
    for target in targets:
        with create_handle(mode_value, stream=stream) as limited:
            limited.sm_count_target = target
            run(a, b, out, limited, shape)
            mismatch = _compare.compare(reference, out)
        per_target[target] = mismatch.mismatched_elements
        if not mismatch.identical:
            differing += 1
            if mismatch.max_ulp > worst.max_ulp:
                worst = mismatch
    detail = ", ".join(f"{t} SMs: {'identical' if n == 0 else f'{n} elements differ'}"
                       for t, n in per_target.items()) + f" (device has {sm_count})"
    return ScenarioResult.from_worst("sm-count", len(targets), differing, worst, detail,
                                     {"mismatched_by_sm_count": per_target})


_SCENARIO_FUNCTIONS = {
    "repeat": _scenario_repeat,
    "fresh-handle": _scenario_fresh_handle,
    "streams-shared-handle": _scenario_streams_shared,
    "streams-per-handle": _scenario_streams_per_handle,
    "batch-invariance": _scenario_batch_invariance,
    "sm-count": _scenario_sm_count,
}


# -- modes --------------------------------------------------------------------------------------
def _modes_matrix(shape: GemmShape, a, b) -> ScenarioResult:
    """Digests and errors of every math mode x compute type; stored whole in ``extra``."""
    import cupy

    reference64 = _fp64_reference(shape, a, b)
    cells, outputs = {}, {}
    for mode in MODES:
        with create_handle(mode) as handle:
            for compute in MATRIX_COMPUTE_TYPES:
                out = cupy.empty((shape.m, shape.n), cupy.float32)
                cublas_gemm(a, b, out, handle, shape, compute_type=compute)
                key = f"{mode.name}/{compute.name}"
                cells[key] = {"digest": _compare.digest(out), "rel_error": _compare.relative_error(out, reference64)}
                if compute is ComputeType.COMPUTE_32F:
                    outputs[mode.name] = out
    groups = _identical_groups({name: cells[f"{name}/COMPUTE_32F"]["digest"] for name in outputs})
    return ScenarioResult("modes", len(MODES), 0, detail=" | ".join(" = ".join(g) for g in groups),
                          extra={"matrix": cells, "groups": groups, "outputs": outputs})


def _identical_groups(digests: dict[str, str]) -> list[list[str]]:
    groups: dict[str, list[str]] = {}
    for name, value in digests.items():
        groups.setdefault(value, []).append(name)
    return list(groups.values())


def _modes_for(matrix: ScenarioResult, mode_value: int) -> ScenarioResult:
    """The mode matrix seen from one mode: how many other modes give other bits, and how far."""
    if matrix.error:
        return matrix
    name = MathMode(mode_value & 0xF).name
    outputs = matrix.extra["outputs"]
    if name not in outputs:
        return dataclasses.replace(matrix, extra={k: v for k, v in matrix.extra.items() if k != "outputs"})
    mine = outputs[name]
    differing, worst = 0, _NO_MISMATCH
    for other, out in outputs.items():
        if other != name:
            mismatch = _compare.compare(mine, out)
            if not mismatch.identical:
                differing += 1
                if mismatch.max_ulp > worst.max_ulp:
                    worst = mismatch
    extra = {k: v for k, v in matrix.extra.items() if k != "outputs"}
    return ScenarioResult.from_worst("modes", len(outputs) - 1, differing, worst, matrix.detail, extra)


# -- scenarios in other processes ---------------------------------------------------------------
def _start_workers(shapes, resolved, scenarios, repeats, seed, gemm_fn) -> dict:
    """Start worker processes now; they run while this process checks. Returns name -> Popen/str."""
    wanted = [name for name in PROCESS_SCENARIOS if name in scenarios]
    if not wanted:
        return {}
    if gemm_fn is not None:
        return {name: f"{name} cannot run a custom gemm_fn in another process" for name in wanted}
    import cupy

    tasks = [{"spec": shape.spec, "name": shape.name, "mode": mode_value, "seed": seed}
             for shape in shapes for mode_value, _ in resolved]
    device = cupy.cuda.runtime.getDevice()
    workers = {}
    env = {k: v for k, v in os.environ.items() if k != "CUBLAS_WORKSPACE_CONFIG"}
    if "fresh-process" in wanted:
        for i in range(FRESH_PROCESSES):
            request = {"device": device, "tasks": tasks, "scenarios": [], "repeats": repeats}
            workers[f"fresh-process#{i}"] = spawn(request, env)
    if "workspace-config" in wanted:
        request = {"device": device, "tasks": tasks, "scenarios": ["streams-shared-handle"], "repeats": repeats}
        workers["workspace-config"] = spawn(request, {**env, "CUBLAS_WORKSPACE_CONFIG": WORKSPACE_CONFIG})
    return workers


def _merge_worker_results(checks: list[GemmCheck], workers: dict) -> list[GemmCheck]:
    if not workers:
        return checks
    answers = {name: collect(process) for name, process in workers.items()}
    merged = []
    for check in checks:
        key = f"{check.shape.spec}|{check.mode}"
        results = []
        for result in check.scenarios:
            if result.scenario == "fresh-process":
                result = _fresh_process_result(check, key, answers)
            elif result.scenario == "workspace-config":
                result = _workspace_config_result(check, key, answers["workspace-config"])
            results.append(result)
        merged.append(dataclasses.replace(check, scenarios=tuple(results)))
    return merged


def _fresh_process_result(check: GemmCheck, key: str, answers: dict) -> ScenarioResult:
    digests, errors = [], []
    for name, (answer, error) in answers.items():
        if not name.startswith("fresh-process"):
            continue
        task = (answer or {}).get("results", {}).get(key)
        if task is None or task.get("error"):
            errors.append(error or (task or {}).get("error") or "no result")
        else:
            digests.append(task["digest"])
    if errors and not digests:
        return ScenarioResult("fresh-process", 0, 0, error="; ".join(errors))
    differing = sum(d != check.digest for d in digests)
    detail = f"{len(digests)} other processes; digests {'all match' if not differing else 'differ'}"
    return ScenarioResult("fresh-process", len(digests) + 1, differing, detail=detail,
                          extra={"digests": digests}, error="; ".join(errors) or None)


def _workspace_config_result(check: GemmCheck, key: str, answer_error) -> ScenarioResult:
    answer, error = answer_error
    if error:
        return ScenarioResult("workspace-config", 0, 0, error=error)
    task = answer["results"].get(key, {})
    if task.get("error"):
        return ScenarioResult("workspace-config", 0, 0, error=task["error"])
    shared = ScenarioResult.from_dict(task["scenarios"][0])
    # The worker compares its stream outputs with its own first output. Say whether that first output
    # matched this process's bits, so that a difference can be placed: in the reference or in the streams.
    same_reference = task["digest"] == check.digest
    detail = (f"CUBLAS_WORKSPACE_CONFIG={WORKSPACE_CONFIG}: {shared.detail}; the worker's first output "
              f"{'matches' if same_reference else 'differs from'} this process's bits")
    return dataclasses.replace(shared, scenario="workspace-config", detail=detail,
                               extra={**shared.extra, "reference_digest": task["digest"],
                                      "reference_matches_this_process": same_reference})
