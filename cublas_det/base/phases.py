"""Where a run's wall time goes: seconds per phase (operands, references, each scenario, timing ...)."""

from __future__ import annotations

import contextlib
import time


class Phases:
    """Wall seconds by phase name, summed over every time a phase is entered."""

    def __init__(self):
        self.seconds: dict[str, float] = {}

    @contextlib.contextmanager
    def __call__(self, name: str):
        started = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + (time.perf_counter() - started)
