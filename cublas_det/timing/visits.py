"""A run's timing in visits: each shape is timed in short visits, round-robin over the run's shapes,
each visit on a setup made anew. Apart from the GPU: the setups come from an ``open_visit`` callback.

Why visits: a shape's TF32/PEDANTIC ratio moves from one moment of a run to the next, and from one
placement of its buffers to the next, by more than its rounds show. A shape timed in one stretch
(48 rounds in a second, on setups made together) held one moment, so another run's median fell
outside its interval far more often than 5% (on an H200: 25 of 30 run pairs inside where 29 were
due; 97 of 180 across two machine sessions where 173 were due). Measured on H200s (trunk shapes):

- visits of one process, seconds apart, differed by 0.41% (sd) beyond the spread of setups made
  together (0.25%);
- with each visit's buffers in the pool's blocks of the visit before (12 visits a shape, 4 runs),
  runs still differed by 0.14% beyond their visits' spread: 141 of 180 pairs inside where 172
  were due. The pages carry a bias, and a process's pool hands every visit the same pages; with
  the pool emptied and a random spacer before each visit (``engine.fresh_placement``), 4
  processes x 6 visits differed by 0.00% beyond (0.14% without, in the same processes).

So each visit takes one whole Williams cycle of rounds on a setup of its own, and a sample's setup
is its visit: the interval's between-setup term (``stats.between_setups``) is the spread between
visits, the moments', the placements' and the setups' biases together, which more visits shrink.
A visit of one setup is the cheapest way to sample them all.
"""

from __future__ import annotations

import dataclasses
import time

from .order import cycle_length
from .rounds import MAX_REDOS, KeptRounds
from .stats import TARGET_HALF_WIDTH, Ratio, StopReason, stop_reason

MIN_VISITS_FOR_INTERVAL = 2  # the between-visit term needs two; the budget stops no shape before


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


def visits_for(rounds: int, arms: int) -> int:
    """Visits of one Williams cycle each that make at least ``rounds`` rounds (one at least)."""
    cycle = cycle_length(arms)
    return max(1, -(-rounds // cycle))


def run_visits(keys, names: list[str], open_visit, *, min_visits: int, max_visits: int, budget_s: float,
               target_half_width: float = TARGET_HALF_WIDTH, clock_floor_mhz: float | None = None,
               max_redos: int = MAX_REDOS, failures: tuple = (), on_visit=None, now=time.perf_counter,
               sleep=time.sleep) -> VisitsRun:
    """Visit every shape of ``keys`` in turn, again and again, until each stops.

    ``open_visit(key, visit)`` is a context manager that makes a setup of shape ``key`` and gives
    its ``measure_round(order, setup)``; a visit takes one Williams cycle of rounds on it, with
    ``setup`` = the visit's number. After each visit the shape's ratios are formed over all its
    visits, and it stops when every interval is within ``target_half_width`` after ``min_visits``
    (two at least), at ``max_visits``, or when its rounds have spent ``budget_s`` (after two visits). An exception
    of ``failures`` ends that shape's timing with the reason in one line; the others go on.
    ``on_visit(visit, going)``: called after each turn with the number of shapes still going.
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
                    with open_visit(key, visit) as measure_round:
                        start = now()
                        rounds.take(measure_round, cycle, visit, clock_floor_mhz=clock_floor_mhz,
                                    max_redos=max_redos, sleep=sleep)
                        spent[key] += now() - start
                except failures as err:
                    run.errors[key] = f"timing failed: {type(err).__name__}: {err}"
                    del going[key]
                    continue
                ratios = rounds.ratios()
                reason = stop_reason(ratios, rounds.rounds, spent[key], min_rounds=min_visits * cycle,
                                     max_rounds=max_visits * cycle, budget_s=budget_s,
                                     target_half_width=target_half_width, cycle=cycle,
                                     budget_floor=MIN_VISITS_FOR_INTERVAL * cycle)
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
