"""The round loop of side-by-side timing, apart from the GPU: order, redo, pair, stop. A round below the
clock floor, or unheld, is redone up to ``MAX_REDOS`` a shape, then kept and counted, so it still ends."""

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
    """One arm's batch in one round: seconds per call (graph, and eager where taken), the SM clock, and
    whether the blocking kernel held the stream until the batch was queued."""

    graph_s: float
    eager_s: float | None
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


class KeptRounds:
    """One shape's kept rounds, a :class:`Sample` per arm and round, and what was redone; the Williams
    order follows the kept rounds, so visits of whole cycles keep a shape balanced."""

    def __init__(self, names: list[str]):
        self.names = list(names)
        self.kept = {name: [] for name in self.names}
        self.discards = Discards()

    @property
    def rounds(self) -> int:
        return len(self.kept[self.names[0]])

    def take(self, measure_round, count: int, setup: int = 0, *, clock_floor_mhz: float | None = None,
             max_redos: int = MAX_REDOS, eager: bool = True, sleep=time.sleep) -> None:
        """``count`` more rounds, ``measure_round(order, setup, eager)``, each retaken in its order while it has
        a problem, until ``max_redos`` are redone; with ``eager``, the first also times each arm eagerly."""
        for index in range(count):
            order = round_order(self.names, self.rounds)
            while True:
                measured = measure_round(order, setup, eager and index == 0)
                problem = round_problem(measured, clock_floor_mhz)
                if problem is None:
                    break
                redo = self.discards.redone < max_redos
                self.discards = self.discards.add(problem, kept=not redo)
                if not redo:
                    break
                if problem == "throttled":
                    sleep(THROTTLE_PAUSE_S)
            for name in self.names:
                self.kept[name].append(measured[name])

    def keep_first(self, count: int) -> None:
        for name in self.names:
            del self.kept[name][count:]

    def ratios(self) -> tuple[Ratio, ...]:
        """The paired ratios of the kept rounds; taken on several setups, their spread widens the intervals."""
        taken_on = [s.setup for s in self.kept[self.names[0]]]
        setups = taken_on if len(set(taken_on)) > 1 else None
        return tuple(paired_ratio(str(n), str(d), [s.graph_s for s in self.kept[n]],
                                  [s.graph_s for s in self.kept[d]], setups) for n, d in ratio_pairs(self.names))


def run_rounds(names: list[str], measure_round, *, min_rounds: int = 12, max_rounds: int = 100,
               budget_s: float = 3.0, target_half_width: float = TARGET_HALF_WIDTH,
               clock_floor_mhz: float | None = None, started: float | None = None, max_redos: int = MAX_REDOS,
               now=time.perf_counter, sleep=time.sleep) -> RoundsOutcome:
    """Rounds of one setup until the stopping rule says stop; ``started``: when the shape's budget began."""
    started = now() if started is None else started
    rounds = KeptRounds(names)
    cycle = cycle_length(len(names))
    while True:
        rounds.take(measure_round, 1, clock_floor_mhz=clock_floor_mhz, max_redos=max_redos, sleep=sleep)
        ratios = rounds.ratios()
        reason = stop_reason(ratios, rounds.rounds, now() - started, min_rounds=min_rounds, max_rounds=max_rounds,
                             budget_s=budget_s, target_half_width=target_half_width, cycle=cycle)
        if reason is not None:
            return RoundsOutcome(rounds.kept, ratios, rounds.rounds, reason, rounds.discards)
