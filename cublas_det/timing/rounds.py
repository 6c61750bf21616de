"""The round loop of side-by-side timing, apart from the GPU: order, redo, pair, stop.

``run_rounds`` asks a ``measure_round(order, setup)`` callback for one sample per arm, in the
Williams order of the round, on one of ``setups`` setups (whole order cycles on each in turn), and
decides everything else: a round whose batch ran below the clock floor
(nvbench's 75% of the default SM clock) or started without the stream held is redone, after a
pause when throttled, up to ``max_redos`` times a shape (then kept and counted, so a GPU that
stays throttled still ends); kept rounds are paired into ratios; the stopping rule says when and
why to stop. The GPU loop supplies the callback; tests supply synthetic rounds.
"""

from __future__ import annotations

import dataclasses
import time

from .order import cycle_length, round_order
from .results import Discards, ratio_pairs
from .stats import TARGET_HALF_WIDTH, Ratio, StopReason, paired_ratio, stop_reason

MAX_REDOS = 10
THROTTLE_PAUSE_S = 0.05  # nvbench's pause after a throttled sample, to let the clocks recover
THROTTLE_FRACTION = 0.75  # nvbench's floor: samples below 75% of the default SM clock are discarded


@dataclasses.dataclass(frozen=True)
class Sample:
    """One arm's batch in one round: seconds per call (graph replay, eager), the SM clock, and
    whether the blocking kernel held the stream until the batch was queued."""

    graph_s: float
    eager_s: float
    clock_mhz: float | None = None
    held: bool = True
    setup: int = 0  # which setup (operand buffers, handles, graphs) took it


@dataclasses.dataclass(frozen=True)
class RoundsOutcome:
    samples: dict  # arm name -> list of kept Samples, one per kept round
    ratios: tuple[Ratio, ...]
    rounds: int
    stop_reason: StopReason
    discards: Discards


def round_problem(samples: dict, clock_floor_mhz: float | None) -> str | None:
    """Why a round cannot be used as it is ("unheld", "throttled"), or None."""
    if any(not s.held for s in samples.values()):
        return "unheld"
    if clock_floor_mhz and any(s.clock_mhz is not None and s.clock_mhz < clock_floor_mhz for s in samples.values()):
        return "throttled"
    return None


def take_round(measure_round, order: list[str], setup: int, discards: Discards, *,
               clock_floor_mhz: float | None = None, max_redos: int = MAX_REDOS,
               sleep=time.sleep) -> tuple[dict, Discards]:
    """One round, ``measure_round(order, setup)``, taken again in the same order while it cannot be used
    as it is (:func:`round_problem`), after a pause when throttled, until ``discards`` holds
    ``max_redos`` redos (a shape's allowance); then kept as it is. Returns the round's samples and
    ``discards`` with this round's redos and keeps counted."""
    while True:
        measured = measure_round(order, setup)
        problem = round_problem(measured, clock_floor_mhz)
        if problem is None:
            return measured, discards
        redo = discards.redone < max_redos
        discards = discards.add(problem, kept=not redo)
        if not redo:
            return measured, discards
        if problem == "throttled":
            sleep(THROTTLE_PAUSE_S)


def run_rounds(names: list[str], measure_round, *, min_rounds: int = 12, max_rounds: int = 100,
               budget_s: float = 3.0, target_half_width: float = TARGET_HALF_WIDTH,
               clock_floor_mhz: float | None = None, started: float | None = None, max_redos: int = MAX_REDOS,
               setups: int = 1, now=time.perf_counter, sleep=time.sleep) -> RoundsOutcome:
    """Rounds until the stopping rule says stop; ``started`` is when the shape's budget began.

    With several ``setups``, each takes whole Williams cycles in turn, and every stop (interval,
    rounds, budget) comes at the end of a whole pass, when every setup has taken as many rounds:
    ``max_rounds`` is rounded down to whole passes (one at least), and the budget is checked only
    there.
    """
    started = now() if started is None else started
    kept = {name: [] for name in names}
    pairs = ratio_pairs(names)
    order_cycle = cycle_length(len(names))
    cycle = order_cycle * setups
    if setups > 1:
        max_rounds = max(cycle, max_rounds // cycle * cycle)
    discards = Discards()
    ratios: list[Ratio] = []
    rounds = 0
    while True:
        # The order follows kept rounds: a redone round is retaken in the same order, so the
        # kept rounds stay balanced.
        measured, discards = take_round(measure_round, round_order(names, rounds), (rounds // order_cycle) % setups,
                                        discards, clock_floor_mhz=clock_floor_mhz, max_redos=max_redos, sleep=sleep)
        for name in names:
            kept[name].append(measured[name])
        rounds += 1
        if setups > 1 and rounds % cycle:
            continue  # within a pass: no stop, so no setup is left with fewer rounds
        taken_on = [s.setup for s in kept[names[0]]] if setups > 1 else None
        ratios = [paired_ratio(n, d, [s.graph_s for s in kept[n]], [s.graph_s for s in kept[d]], taken_on)
                  for n, d in pairs]
        reason = stop_reason(ratios, rounds, now() - started, min_rounds=min_rounds, max_rounds=max_rounds,
                             budget_s=budget_s, target_half_width=target_half_width, cycle=cycle)
        if reason is not None:
            return RoundsOutcome(kept, tuple(ratios), rounds, reason, discards)
