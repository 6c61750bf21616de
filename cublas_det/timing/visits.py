"""A run's timing in visits: each shape is timed in short visits, round-robin over the run's shapes,
each visit on a setup made anew (by an ``open_visit`` callback: no GPU here).

Why: a setup, and the moment it is timed at, keeps a bias its own rounds do not show; with a
sample's setup its visit, the interval's between-setup term (``stats.between_term``) holds it.
"""

from __future__ import annotations

import dataclasses
import time

from .order import cycle_length
from .rounds import MAX_REDOS, KeptRounds
from .stats import TARGET_HALF_WIDTH, Ratio, StopReason, stop_reason

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
    rounds_s: float  # time spent in its rounds (not in making its setups)


@dataclasses.dataclass
class VisitsRun:
    """What a run of visits gave: the shapes timed, the shapes whose timing failed (why, in one line),
    and whether Ctrl-C ended it (shapes with fewer than two visits then have no interval and are left out)."""

    outcomes: dict = dataclasses.field(default_factory=dict)  # key -> VisitsOutcome
    errors: dict = dataclasses.field(default_factory=dict)  # key -> "timing failed: ..."
    interrupted: bool = False


def _visit(open_visit, key, visit: int, rounds: KeptRounds, cycle: int, now, **take) -> float:
    """One visit: a Williams cycle of rounds on the setup ``open_visit`` makes; the seconds its rounds
    took. A function of its own so that the setup is gone before the next visit's is made."""
    with open_visit(key, visit) as measure_round:
        start = now()
        rounds.take(measure_round, cycle, visit, **take)
        return now() - start


def run_visits(keys, names: list[str], open_visit, *, min_visits: int, max_visits: int, budget_s: float,
               target_half_width: float = TARGET_HALF_WIDTH, clock_floor_mhz: float | None = None,
               max_redos: int = MAX_REDOS, failures: tuple = (), on_visit=None, now=time.perf_counter,
               sleep=time.sleep, budget_floor_visits: int = BUDGET_FLOOR_VISITS) -> VisitsRun:
    """Visit every shape of ``keys`` in turn, again and again, until each stops.

    ``open_visit(key, visit)`` is a context manager that makes a setup of shape ``key`` and gives
    its ``measure_round(order, setup, eager)``; a visit takes one Williams cycle of rounds on it.
    A shape stops by :func:`~.stats.stop_reason` over all its visits (``min_visits`` two at least).
    An exception of ``failures`` ends that shape's timing with the reason in one line; the others
    go on. ``on_visit(visit, going)``: called after each turn with the number of shapes still going.
    Ctrl-C ends the run as interrupted: each shape keeps its whole visits.
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
                    run.outcomes[key] = VisitsOutcome(rounds, ratios, visit + 1, reason, spent[key])
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
                run.outcomes[key] = VisitsOutcome(rounds, rounds.ratios(), visits, StopReason.INTERRUPTED,
                                                  spent[key])
    return run
