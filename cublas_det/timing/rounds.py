"""The rounds of side-by-side timing, apart from the GPU: order, redo, pair (``visits`` decides when to
stop). A round below the clock floor, or unheld, is redone up to ``MAX_REDOS`` a shape, then kept and
counted, so it still ends."""

from __future__ import annotations

import dataclasses
import time

from ..results.timing import Discards, ratio_pairs
from ..results.stats import Ratio, paired_ratio

MAX_REDOS = 10
THROTTLE_PAUSE_S = 0.05  # nvbench's pause after a throttled sample, to let the clocks recover
THROTTLE_FRACTION = 0.75  # nvbench's floor: samples below 75% of the default SM clock are discarded


def williams_rows(n: int) -> list[list[int]]:
    """The arms' order in each round: a Williams design (a balanced Latin square; for odd n with its mirror), so
    every arm stands in every position and follows every other equally often and carry-over balances out."""
    if n < 1:
        raise ValueError(f"need at least one arm, not {n}")
    # First row 0, 1, n-1, 2, n-2, ...: consecutive differences take every value 1..n-1 once
    # (mod n), so the shifted rows give every ordered pair of neighbours exactly once.
    first = [0] + [(k + 1) // 2 if k % 2 else n - k // 2 for k in range(1, n)]
    rows = [[(index + shift) % n for index in first] for shift in range(n)]
    if n % 2 and n > 1:  # odd n: the mirrored square supplies the pairs in the other direction
        rows += [list(reversed(row)) for row in rows]
    return rows


def cycle_length(n: int) -> int:
    return len(williams_rows(n))


def round_order(arms: list[str], round_index: int) -> list[str]:
    rows = williams_rows(len(arms))
    return [arms[i] for i in rows[round_index % len(rows)]]


@dataclasses.dataclass(frozen=True)
class Sample:
    """One arm's batch in one round: seconds per call (graph, and eager where taken), the SM clock, and
    whether the blocking kernel held the stream until the batch was queued."""

    graph_s: float
    eager_s: float | None
    clock_mhz: float | None = None
    held: bool = True
    setup: int = 0  # which setup (operand buffers, handles, graphs) took it


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

