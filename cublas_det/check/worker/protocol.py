"""What the parent sends a worker (a :class:`Request`, JSON on stdin) and what it answers (an
:class:`Answer`, JSON on stdout), in the run file's codec (:class:`~cublas_det.base.schema.Codec`)."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from ...core.config import GemmConfig
from ...core.shapes import GemmShape, gemm_key
from ...base.schema import Codec
from ...results.check import ScenarioResult


@dataclasses.dataclass(frozen=True)
class Task(Codec):
    """One GEMM to check: the whole shape, not only its spec (the scenarios read its pass: a dW GEMM's batch is
    K); parent and worker are one version, so the worker reads only what this parent writes."""

    DECODE: ClassVar[dict] = {"shape": GemmShape.from_dict, "config": GemmConfig.from_dict, "seed": int}

    shape: GemmShape
    config: GemmConfig
    seed: int = 0

    @property
    def key(self) -> str:
        return gemm_key(self.shape.spec, self.config.name)


@dataclasses.dataclass(frozen=True)
class Request(Codec):
    """Check every task on ``device`` under ``scenarios`` (in-process ones), ``repeats`` runs each."""

    DECODE: ClassVar[dict] = {"device": int, "tasks": lambda tasks: tuple(map(Task.from_dict, tasks)),
                              "scenarios": tuple, "repeats": int}

    device: int
    tasks: tuple[Task, ...]
    scenarios: tuple[str, ...] = ()
    repeats: int = 20


@dataclasses.dataclass(frozen=True)
class TaskAnswer(Codec):
    """One task's outcome in the worker, or why it failed."""

    DECODE: ClassVar[dict] = {"scenarios": lambda results: tuple(map(ScenarioResult.from_dict, results))}

    digest: str = ""
    rel_error: float = float("nan")
    scenarios: tuple[ScenarioResult, ...] = ()
    error: str | None = None
    input_digests: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Answer(Codec):
    """A worker's answer."""

    DECODE: ClassVar[dict] = {"results": lambda results: {key: TaskAnswer.from_dict(value)
                                                          for key, value in results.items()},
                              "elapsed_s": float}

    results: dict  # task key -> TaskAnswer
    provenance: dict = dataclasses.field(default_factory=dict)
    elapsed_s: float = 0.0
