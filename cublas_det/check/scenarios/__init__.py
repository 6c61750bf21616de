"""The reproducibility scenarios: the one registry of their names, descriptions and kinds."""

from __future__ import annotations

from ...results.check import Kind
from .base import GemmFunction, Scenario, ScenarioContext
from .batch import BATCH_INVARIANCE
from .modes import MODES_SCENARIO
from .processes import FRESH_PROCESS, WORKSPACE_CONFIG_SCENARIO, ProcessScenario
from .repeat import FRESH_HANDLE, REPEAT
from .sm_count import SM_COUNT
from .streams import STREAMS_PER_HANDLE, STREAMS_SHARED_HANDLE

REGISTRY: dict[str, Scenario] = {scenario.name: scenario for scenario in (
    REPEAT, FRESH_HANDLE, FRESH_PROCESS, STREAMS_SHARED_HANDLE, STREAMS_PER_HANDLE, WORKSPACE_CONFIG_SCENARIO,
    BATCH_INVARIANCE, SM_COUNT, MODES_SCENARIO,
)}
DEFAULT_SCENARIOS = (REPEAT.name, FRESH_HANDLE.name)
# The hazards, in the order a check runs them to verify a cure; each declares its evidence.
HAZARDS = (SM_COUNT.name, STREAMS_SHARED_HANDLE.name, BATCH_INVARIANCE.name)

__all__ = ["DEFAULT_SCENARIOS", "GemmFunction", "HAZARDS", "Kind", "ProcessScenario", "REGISTRY", "Scenario",
           "ScenarioContext", "validate_scenarios", "without_workers"]


def validate_scenarios(names, listed_in: str = "") -> tuple[str, ...]:
    """The names as a tuple, each once; ValueError names an unknown one and the choices (with ``listed_in``,
    a command line's, the first two and where the rest are listed)."""
    if isinstance(names, str):
        names = (names,)
    unknown = [name for name in names if name not in REGISTRY]
    if unknown:
        choices = f"{', '.join(list(REGISTRY)[:2])}, ... (in {listed_in})" if listed_in else ", ".join(REGISTRY)
        raise ValueError(f"unknown scenario {', '.join(map(repr, unknown))}; choose from {choices}")
    return tuple(dict.fromkeys(names))


def without_workers(names) -> tuple[str, ...]:
    """The scenarios that need no other process (``--quick``)."""
    return tuple(name for name in names if not REGISTRY[name].in_worker)
