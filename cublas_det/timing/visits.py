"""A run's timing in visits, round-robin over its shapes, each on a setup made anew (``open_visit``): a setup
keeps a bias its own rounds do not show, which the interval's between-setup term holds."""

from __future__ import annotations

import dataclasses
import time

from .rounds import MAX_REDOS, KeptRounds, cycle_length
from ..results.stats import TARGET_HALF_WIDTH, Ratio, StopReason, stop_reason

MIN_VISITS_FOR_INTERVAL = 2  # the between-visit term needs two
EAGER_VISITS = 1  # the eager batch, host-bound for small GEMMs, informs and is never a ratio's: taken once
BUDGET_FLOOR_VISITS = 4  # the budget stops no shape before (t(3) = 3.2; t(1) would be 12.7)


@dataclasses.dataclass(frozen=True)
class VisitsOutcome:
    """One shape's timing over its visits: the kept rounds, their ratios, and why it stopped."""

    rounds: KeptRounds
    ratios: tuple[Ratio, ...]
    visits: int
    stop_reason: StopReason


@dataclasses.dataclass
class VisitsRun:
    """The shapes timed, those whose timing failed (why, in one line), and whether Ctrl-C ended the run."""

    outcomes: dict = dataclasses.field(default_factory=dict)  # key -> VisitsOutcome
    errors: dict = dataclasses.field(default_factory=dict)  # key -> "timing failed: ..."
    interrupted: bool = False


def _visit(open_visit, key, visit: int, rounds: KeptRounds, cycle: int, now, **take) -> float:
    """A Williams cycle of rounds on a setup of its own, gone with this frame before the next is made; its
    rounds' seconds."""
    with open_visit(key, visit) as measure_round:
        start = now()
        rounds.take(measure_round, cycle, visit, **take)
        return now() - start


def run_visits(keys, names: list[str], open_visit, *, min_visits: int, max_visits: int, budget_s: float,
               target_half_width: float = TARGET_HALF_WIDTH, clock_floor_mhz: float | None = None,
               max_redos: int = MAX_REDOS, failures: tuple = (), on_visit=None, now=time.perf_counter,
               sleep=time.sleep, budget_floor_visits: int = BUDGET_FLOOR_VISITS) -> VisitsRun:
    """Visit every shape of ``keys`` in turn until each stops (:func:`~.stats.stop_reason` over its visits).

    ``open_visit(key, visit)`` makes a setup and gives its ``measure_round(order, setup, eager)``. An
    exception of ``failures`` ends that shape's timing; ``on_visit(visit, going)`` follows each turn. Ctrl-C
    ends the run as interrupted, each shape keeping its whole visits.
    """
    cycle = cycle_length(len(names))
    min_visits = max(min_visits, MIN_VISITS_FOR_INTERVAL)  # one visit has no between-visit term to show
    max_visits = max(max_visits, min_visits)
    run = VisitsRun()
    going = {key: KeptRounds(names) for key in keys}
    spent = dict.fromkeys(going, 0.0)
    visit = 0
    try:
        while going:
            for key in list(going):
                rounds = going[key]
                try:
                    spent[key] += _visit(open_visit, key, visit, rounds, cycle, now, clock_floor_mhz=clock_floor_mhz,
                                         max_redos=max_redos, eager=visit < EAGER_VISITS, sleep=sleep)
                except failures as err:
                    run.errors[key] = f"timing failed: {type(err).__name__}: {err}"
                    del going[key]
                    continue
                ratios = rounds.ratios()
                reason = stop_reason(ratios, rounds.rounds, spent[key], min_rounds=min_visits * cycle,
                                     max_rounds=max_visits * cycle, budget_s=budget_s,
                                     target_half_width=target_half_width, cycle=cycle,
                                     budget_floor=budget_floor_visits * cycle)
                if reason is not None:
                    run.outcomes[key] = VisitsOutcome(rounds, ratios, visit + 1, reason)
                    del going[key]
            visit += 1
            if on_visit is not None:
                on_visit(visit, len(going))
    except KeyboardInterrupt:
        run.interrupted = True
        for key, rounds in going.items():
            rounds.keep_first(rounds.rounds // cycle * cycle)  # a visit cut short is left out
            visits = rounds.rounds // cycle
            if visits >= MIN_VISITS_FOR_INTERVAL:
                run.outcomes[key] = VisitsOutcome(rounds, rounds.ratios(), visits, StopReason.INTERRUPTED)
    return run
