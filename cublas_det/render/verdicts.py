"""The cells every report shows for a check: a failed guarantee ("reproducible: NO") and a hazard that
changed bits (under "hazards") never share a word or a column."""

from __future__ import annotations

from ..check.results import GemmCheck, Kind, Reproducible
from ..check.scenarios import REGISTRY


def label(name: str) -> str:
    """A scenario's few words for tables ("batch size"); the name itself for one not registered."""
    return REGISTRY[name].label if name in REGISTRY else name


def reproducible_cell(check: GemmCheck | None) -> str:
    """``yes``, ``NO: <guarantees that gave other bits>``, ``error: <what could not run>``, ``not checked``."""
    if check is None:
        return "-"
    if check.verdict is Reproducible.NO:
        return "NO: " + ", ".join(r.scenario for r in check.guarantee_failures)
    if check.verdict is Reproducible.ERROR:
        failed = [r.scenario for r in check.errors if r.kind is Kind.GUARANTEE]
        return "error: " + (", ".join(failed) if failed and not check.error else "no output")
    return check.verdict.value


def hazards_cell(check: GemmCheck | None) -> str:
    """The hazards that changed bits (``batch size, SM count``) or could not run; ``none``: those checked did
    not; ``-``: none was checked."""
    hazards = [r for r in check.of_kind(Kind.HAZARD) if r.compared or r.error] if check and not check.error else []
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
    """What fails the run (exit 1): a guarantee that gave other bits or could not run, or a GEMM that could
    not be computed; a hazard or comparison that could not run is reported, not failed."""
    failed = [r.scenario for r in check.guarantee_failures]
    failed += [r.scenario for r in check.errors if r.kind is Kind.GUARANTEE]
    return list(dict.fromkeys(failed)) or (["reference"] if check.error else [])
