"""``check_gemm()`` / ``check_many()``: do a GEMM's output bits repeat, and under which conditions do they stop?

Orchestration (operands, the reference, the scenarios, their workers) that only measures: a
:class:`GemmCheck` never raises on a mismatch (``cublas_det.testing`` and the CLI judge)."""

from __future__ import annotations

import dataclasses
import functools
import time

from ..bindings.cublas import MathMode
from ..bits.compare import relative_error
from ..bits.digest import digest_later
from ..core.call import shape_gemm
from ..core.config import GemmConfig, resolve_config
from ..core.device import fingerprint, require_gpu
from ..core.handle import create_handle
from ..base.integers import is_int
from ..kernels.recorder import require_cupti
from ..core.memory import check_fits
from ..core.operands import HostOperands, Operands, fp64_reference, output, same_seed
from ..base.phases import Phases
from ..core.shapes import GemmShape, parse_shape
from ..results.check import CallKernels, GemmCheck, ScenarioResult
from .scenarios import (
    DEFAULT_SCENARIOS,
    REGISTRY,
    GemmFunction,
    ScenarioContext,
    validate_scenarios,
)
from .scenarios.base import guarded, traced
from .scenarios.modes import RUN_CONFIGS
from .scenarios.sm_count import SM_TARGETS
from .worker.parent import INTERRUPTED, collect, kill_all, spawn
from .worker.protocol import Task

__all__ = ["CheckInterrupted", "DEFAULT_SCENARIOS", "check_gemm", "check_many"]


def check_gemm(shape: GemmShape | str, mode: GemmConfig | MathMode | int | str | None = None, *, repeats: int = 20,
               scenarios=DEFAULT_SCENARIOS, seed: int = 0, gemm_fn: GemmFunction | None = None,
               kernels: bool = False) -> GemmCheck:
    """Run ``shape`` (``"128x56x4096:nt"``) in ``mode`` (a :class:`GemmConfig` or math mode; default
    ``CUBLAS_DET_MATH_MODE``, else PEDANTIC) under each scenario, ``repeats`` runs each. ``gemm_fn(a, b,
    out, handle, shape)`` replaces the cuBLAS call (to plant faults); ``kernels``: record them (CUPTI).
    Never raises because bits differ."""
    return check_many([shape], [mode], repeats=repeats, scenarios=scenarios, seed=seed, gemm_fn=gemm_fn,
                      kernels=kernels)[0]


class CheckInterrupted(KeyboardInterrupt):
    """Ctrl-C during :func:`check_many`; ``.checks`` holds the checks that had completed."""

    def __init__(self, checks: list):
        super().__init__("interrupted")
        self.checks = checks


def check_many(shapes, modes, *, repeats: int = 20, scenarios=DEFAULT_SCENARIOS, seed: int = 0,
               gemm_fn: GemmFunction | None = None, on_check=None, device_id: int | None = None,
               kernels: bool = False, operands: HostOperands | None = None,
               phases: Phases | None = None, sm_count_targets=()) -> list[GemmCheck]:
    """:func:`check_gemm` over shapes x configurations, sharing inputs and the worker processes (started
    once, running while this process works). ``on_check(check)`` as each in-process check completes; a
    shape that fails (out of memory) records its error and the others go on. ``operands``: the
    :class:`HostOperands` to upload; ``phases`` gets each step's seconds; ``sm_count_targets``: the SM
    counts ``sm-count`` emulates (default: its ladder). Raises CheckInterrupted (with the checks done)
    on Ctrl-C, KernelsUnavailable for ``kernels`` without CUPTI (before any GPU work)."""
    names = validate_scenarios(scenarios)
    if not is_int(repeats, 2):
        raise ValueError(f"repeats must be an int >= 2, not {repeats!r}")
    shapes = [parse_shape(s) if isinstance(s, str) else s for s in shapes]
    configs = [resolve_config(mode) for mode in modes]
    same_seed(operands, seed)
    require_gpu()
    import cupy  # after the arguments: a bad one is refused on any install
    if kernels:
        require_cupti()
    owned = operands is None
    if owned:
        operands = HostOperands(seed)
    try:
        with cupy.cuda.Device(device_id if device_id is not None else cupy.cuda.runtime.getDevice()):
            return _check_all(shapes, configs, names, repeats, seed, gemm_fn, on_check, kernels, operands,
                              phases if phases is not None else Phases(), tuple(sm_count_targets))
    finally:
        if owned:
            operands.close()


def _check_all(shapes, configs, names, repeats, seed, gemm_fn, on_check, kernels, operands,
               phases, sm_count_targets=()) -> list[GemmCheck]:
    import cupy
    provenance = fingerprint()
    tasks = tuple(Task(shape, config, seed) for shape in shapes for config, _ in configs)
    for shape in shapes:  # drawn in threads, in the order the checks take them, while the GPU works
        for config in {config.input_dtype: config for config, _ in configs}.values():
            operands.prefetch([shape], config)
    workers: dict = {}
    checks = []
    try:
        _start_workers(workers, names, tasks, repeats, gemm_fn)  # inside the try: none is left running
        for shape in shapes:
            uploaded: dict = {}  # input dtype -> Operands, or the error that stopped making them
            # What this shape's configurations share: the modes matrix's configurations, the fp64 references.
            shared: dict = {RUN_CONFIGS: tuple(config for config, _ in configs),
                            SM_TARGETS: sm_count_targets}
            for config, source in configs:
                started = time.perf_counter()
                if config.input_dtype not in uploaded:
                    with phases("operands"):
                        uploaded[config.input_dtype] = guarded(functools.partial(_operands, shape, config, operands))
                check = _check_one(shape, config, source, seed, names, repeats, uploaded[config.input_dtype],
                                   gemm_fn or shape_gemm, shared, provenance, kernels, phases)
                check = dataclasses.replace(check, elapsed_s=time.perf_counter() - started)
                checks.append(check)
                if on_check is not None:
                    on_check(check)
            del uploaded, shared
            cupy.get_default_memory_pool().free_all_blocks()
        with phases("workers (waited for)"):
            checks = _merge_worker_results(checks, names, workers)
    except KeyboardInterrupt:
        kill_all(workers)
        raise CheckInterrupted(_merge_worker_results(checks, names, {name: INTERRUPTED for name in workers})) from None
    finally:
        kill_all(workers)
    return checks


def _operands(shape: GemmShape, config: GemmConfig, operands: HostOperands) -> Operands:
    check_fits(shape, config, timing=False)
    return operands.upload(shape, config)


def _check_one(shape, config, source, seed, names, repeats, operands, run, shared, provenance,
               kernels, phases) -> GemmCheck:
    import cupy

    def failed(what: str, err: BaseException, input_digests=None) -> GemmCheck:
        error = f"{what}: {type(err).__name__}: {err}"
        results = tuple(REGISTRY[name].failed(f"no output to check: {error}") for name in names)
        return GemmCheck(shape, config, source.value, seed, "", float("nan"), results, provenance, error=error,
                         input_digests=input_digests or {})

    if isinstance(operands, BaseException):
        return failed("operands", operands)
    a, b = operands.a, operands.b
    stream = cupy.cuda.Stream(non_blocking=True)
    handle = guarded(lambda: create_handle(config, stream=stream))
    if isinstance(handle, BaseException):
        return failed("handle", handle, operands.digests)
    try:
        with stream:
            with phases("references"):
                reference = guarded(lambda: _reference(shape, config, a, b, handle, run, kernels, shared))
            if isinstance(reference, BaseException):
                return failed("reference", reference, operands.digests)
            reference, digest, rel_error, signature = reference
            context = ScenarioContext(shape, config, a, b, reference, handle, stream, repeats, seed, run, shared,
                                      kernels, signature)
            results = []
            for name in names:
                scenario = REGISTRY[name]
                with phases(f"scenario {name}"):
                    # A worker's scenario is pending here, filled in by the workers.
                    results.append(ScenarioResult(name, scenario.kind, 0, 0, detail="pending")
                                   if scenario.in_worker else scenario.run(context))
    finally:
        handle.close()
    digest = guarded(digest.result)  # the copy runs in a thread: a GPU failure there is this check's
    if isinstance(digest, BaseException):
        return failed("reference digest", digest, operands.digests)
    return GemmCheck(shape, config, source.value, seed, digest, rel_error, tuple(results), provenance,
                     input_digests=operands.digests,
                     kernels=CallKernels.from_dict(signature.to_dict()) if signature else None)


def _reference(shape, config, a, b, handle, run, kernels, shared):
    """The first output, its digest (a future), its error against float64, and (with ``kernels``) the
    :class:`KernelSignature` of its call."""
    reference = output(shape, config)
    signature = traced(lambda: run(a, b, reference, handle, shape), kernels)
    return (reference, digest_later(reference),
            relative_error(reference, fp64_reference(shape, a, b, shared)), signature)


def _start_workers(workers: dict, names, tasks, repeats, gemm_fn) -> None:
    """Start the workers the scenarios need into ``workers`` ({name: Popen, or why not}), one by one: the
    caller kills those started if another fails."""
    planned = {}
    for name in names:
        scenario = REGISTRY[name]
        if scenario.in_worker:
            import cupy
            planned.update(scenario.plan(cupy.cuda.runtime.getDevice(), tasks, repeats))
    for worker, (request, env) in planned.items():
        workers[worker] = "a custom gemm_fn cannot run in another process" if gemm_fn else spawn(request, env)


def _merge_worker_results(checks: list[GemmCheck], names, workers: dict) -> list[GemmCheck]:
    if not workers:
        return checks
    answers = {name: collect(process) for name, process in workers.items()}
    merged = []
    for check in checks:
        results = tuple(REGISTRY[r.scenario].merge(check, answers) if REGISTRY[r.scenario].in_worker else r
                        for r in check.scenarios)
        merged.append(dataclasses.replace(check, scenarios=results))
    return merged
