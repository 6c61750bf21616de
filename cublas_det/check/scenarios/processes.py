"""Scenarios that run in other processes: ``fresh-process`` and ``workspace-config``."""

from __future__ import annotations

import dataclasses
import os
from typing import Callable

from ...core.shapes import gemm_key
from ...base.words import plural
from ...results.check import GemmCheck, Kind, ScenarioResult
from ..worker.protocol import Request, Task
from .base import Scenario

FRESH_PROCESSES = 2
WORKSPACE_CONFIG = ":4096:8"


@dataclasses.dataclass(frozen=True)
class ProcessScenario(Scenario):
    """A scenario of worker processes: ``plan(device, tasks, repeats)`` -> ``{worker: (Request, env)}``,
    ``merge(check, {worker: (Answer or None, error or None)})`` -> the result for ``check``."""

    plan: Callable | None = None
    merge: Callable | None = None


def _fresh_process_plan(device: int, tasks: tuple[Task, ...], repeats: int) -> dict:
    # The environment unchanged (CUBLAS_WORKSPACE_CONFIG included): only the process differs.
    env = dict(os.environ)
    return {f"fresh-process#{i}": (Request(device, tasks, (), repeats), env) for i in range(FRESH_PROCESSES)}


def _fresh_process_merge(check: GemmCheck, answers: dict) -> ScenarioResult:
    if not check.digest:
        return FRESH_PROCESS.failed(f"this process computed no output to compare: {check.error or 'no digest'}")
    key = gemm_key(check.shape.spec, check.config.name)
    digests, errors = [], []
    for name, (answer, error) in answers.items():
        if not name.startswith("fresh-process#"):
            continue
        task = answer.results.get(key) if answer else None
        if task is None or task.error or not task.digest:
            errors.append(error or (task.error if task else None) or "no result")
        else:
            digests.append(task.digest)
    if not digests:
        return FRESH_PROCESS.failed("; ".join(errors))
    differing = sum(d != check.digest for d in digests)
    detail = f"{len(digests)} other processes; digests {'differ' if differing else 'all match'}"
    if errors and differing:
        detail += f" ({plural(len(errors), 'worker')} failed: {'; '.join(errors)})"
    return ScenarioResult("fresh-process", Kind.GUARANTEE, len(digests) + 1, differing, detail=detail,
                          extra={"digests": digests}, error="; ".join(errors) if errors and not differing else None)


def _workspace_config_plan(device: int, tasks: tuple[Task, ...], repeats: int) -> dict:
    # The shared-handle case again, the only change of environment the variable the scenario is about.
    env = {**os.environ, "CUBLAS_WORKSPACE_CONFIG": WORKSPACE_CONFIG}
    return {"workspace-config": (Request(device, tasks, ("streams-shared-handle",), repeats), env)}


def _workspace_config_merge(check: GemmCheck, answers: dict) -> ScenarioResult:
    if check.config.api == "lt":
        return WORKSPACE_CONFIG_SCENARIO.does_not_apply("cuBLASLt runs in its handle's own workspace, not in the pool "
                                                        "CUBLAS_WORKSPACE_CONFIG sizes")
    answer, error = answers["workspace-config"]
    if error:
        return WORKSPACE_CONFIG_SCENARIO.failed(error)
    task = answer.results.get(gemm_key(check.shape.spec, check.config.name))
    if task is None or task.error:
        return WORKSPACE_CONFIG_SCENARIO.failed(task.error if task else "no result")
    (shared,) = task.scenarios
    if shared.error:
        return WORKSPACE_CONFIG_SCENARIO.failed(shared.error)
    # Whether the worker's own first output matched this process's places a difference: reference or streams.
    same_reference = bool(check.digest) and task.digest == check.digest
    where = ("this process computed no output to compare" if not check.digest else
             f"the worker's first output {'matches' if same_reference else 'differs from'} this process's bits")
    return dataclasses.replace(
        shared, scenario=WORKSPACE_CONFIG_SCENARIO.name, kind=Kind.GUARANTEE,
        detail=f"CUBLAS_WORKSPACE_CONFIG={WORKSPACE_CONFIG}: {shared.detail}; {where}",
        extra={**shared.extra, "reference_digest": task.digest, "reference_matches_this_process": same_reference})


FRESH_PROCESS = ProcessScenario(
    "fresh-process", "separate Python processes compute the GEMM and their output digests are compared",
    Kind.GUARANTEE, "fresh process", in_worker=True, plan=_fresh_process_plan, merge=_fresh_process_merge)
WORKSPACE_CONFIG_SCENARIO = ProcessScenario(
    "workspace-config", f"the shared-handle case again in a process started with CUBLAS_WORKSPACE_CONFIG="
    f"{WORKSPACE_CONFIG}", Kind.GUARANTEE, "workspace config", in_worker=True, plan=_workspace_config_plan,
    merge=_workspace_config_merge)
