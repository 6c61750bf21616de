"""What the parent sends a worker (a :class:`Request`, JSON on stdin) and what it answers (an
:class:`Answer`, JSON on stdout)."""

from __future__ import annotations

import dataclasses

from ...config import GemmConfig
from ...shapes import GemmShape, gemm_key, parse_shape
from ..results import ScenarioResult


def task_key(shape: GemmShape, config: GemmConfig) -> str:
    return gemm_key(shape.spec, config.name)


@dataclasses.dataclass(frozen=True)
class Task:
    """One GEMM to check."""

    shape: GemmShape
    config: GemmConfig
    seed: int = 0

    @property
    def key(self) -> str:
        return task_key(self.shape, self.config)

    def to_dict(self) -> dict:
        # The whole shape, not only its spec: the scenarios read its pass (a dW GEMM's batch is K).
        return {"spec": self.shape.spec, "shape": self.shape.to_dict(), "config": self.config.to_dict(),
                "seed": self.seed}

    @classmethod
    def from_dict(cls, data: dict) -> Task:
        shape = GemmShape.from_dict(data["shape"]) if "shape" in data else dataclasses.replace(
            parse_shape(data["spec"]), name=data.get("name") or data["spec"])
        return cls(shape, GemmConfig.from_dict(data["config"]), int(data.get("seed", 0)))


@dataclasses.dataclass(frozen=True)
class Request:
    """Check every task on ``device`` under ``scenarios`` (in-process ones), ``repeats`` runs each."""

    device: int
    tasks: tuple[Task, ...]
    scenarios: tuple[str, ...] = ()
    repeats: int = 20

    def to_dict(self) -> dict:
        return {"device": self.device, "tasks": [t.to_dict() for t in self.tasks], "scenarios": list(self.scenarios),
                "repeats": self.repeats}

    @classmethod
    def from_dict(cls, data: dict) -> Request:
        return cls(int(data.get("device", 0)), tuple(Task.from_dict(t) for t in data["tasks"]),
                   tuple(data.get("scenarios", ())), int(data.get("repeats", 20)))


@dataclasses.dataclass(frozen=True)
class TaskAnswer:
    """One task's outcome in the worker, or why it failed."""

    digest: str = ""
    rel_error: float = float("nan")
    scenarios: tuple[ScenarioResult, ...] = ()
    error: str | None = None
    input_digests: dict = dataclasses.field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"digest": self.digest, "rel_error": self.rel_error, "scenarios": [r.to_dict() for r in self.scenarios],
                "error": self.error, "input_digests": self.input_digests}

    @classmethod
    def from_dict(cls, data: dict) -> TaskAnswer:
        return cls(data.get("digest", ""), data.get("rel_error", float("nan")),
                   tuple(ScenarioResult.from_dict(r) for r in data.get("scenarios", ())), data.get("error"),
                   data.get("input_digests", {}))


@dataclasses.dataclass(frozen=True)
class Answer:
    """A worker's answer."""

    results: dict  # task key -> TaskAnswer
    provenance: dict = dataclasses.field(default_factory=dict)
    elapsed_s: float = 0.0

    def to_dict(self) -> dict:
        return {"results": {key: answer.to_dict() for key, answer in self.results.items()},
                "provenance": self.provenance, "elapsed_s": self.elapsed_s}

    @classmethod
    def from_dict(cls, data: dict) -> Answer:
        return cls({key: TaskAnswer.from_dict(value) for key, value in data["results"].items()},
                   data.get("provenance", {}), float(data.get("elapsed_s", 0.0)))
