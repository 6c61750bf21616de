"""The cells and counts every report shows for a check. A failed guarantee ("reproducible: NO") and
a hazard that changed bits (under "hazards") never share a word or a column.
"""

from __future__ import annotations

from ..check.results import GemmCheck, Kind, Reproducible
from ..check.scenarios import REGISTRY


def label(name: str) -> str:
    """A scenario's few words for tables ("batch size"); the name itself for one not registered."""
    scenario = REGISTRY.get(name)
    return scenario.label if scenario else name


def reproducible_cell(check: GemmCheck | None) -> str:
    """``yes``, ``NO: <guarantees that gave other bits>``, ``error: <what could not run>``, ``not checked``."""
    if check is None:
        return "-"
    verdict = check.verdict
    if verdict is Reproducible.NO:
        return "NO: " + ", ".join(r.scenario for r in check.guarantee_failures)
    if verdict is Reproducible.ERROR:
        failed = [r.scenario for r in check.errors if r.kind is Kind.GUARANTEE]
        return "error: " + (", ".join(failed) if failed and not check.error else "no output")
    return verdict.value


def hazards_cell(check: GemmCheck | None) -> str:
    """The hazards that changed bits, in words (``batch size, SM count``); ``none`` when those checked
    did not; ``-`` when none was checked. One that could not run says so."""
    if check is None or check.error:
        return "-"
    hazards = [r for r in check.of_kind(Kind.HAZARD) if r.compared or r.error]
    if not hazards:
        return "-"
    words = [label(r.scenario) for r in hazards if r.changed_bits]
    words += [f"error: {r.scenario}" for r in hazards if r.error]
    return ", ".join(words) or "none"


def modes_group(check: GemmCheck | None) -> list[str] | None:
    """The configurations that gave this one's bits (itself excluded), or None when ``modes`` did not run."""
    result = check.scenario("modes") if check else None
    if result is None or not result.compared or "groups" not in result.extra:
        return None
    if "same_bits_as" in result.extra:  # compared with this configuration's own output
        return list(result.extra["same_bits_as"])
    for group in result.extra["groups"]:  # files of earlier versions: by the groups of modes
        if check.mode_name in group:
            return [name for name in group if name != check.mode_name]
    return []


def modes_cell(check: GemmCheck | None) -> str:
    group = modes_group(check)
    return "-" if group is None else ", ".join(group) or "none"


def check_failures(check: GemmCheck) -> list[str]:
    """What fails the run (exit 1): guarantee scenarios that gave other bits or could not run, and a GEMM
    that could not be computed. A hazard or comparison that could not run is reported, not failed."""
    failed = [r.scenario for r in check.guarantee_failures]
    failed += [r.scenario for r in check.errors if r.kind is Kind.GUARANTEE]
    return list(dict.fromkeys(failed)) or (["reference"] if check.error else [])
