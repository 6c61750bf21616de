"""A run's timing spread over processes: each process takes a share of every shape's visits, one
process after another, and the intervals hold the spread between processes as well as between visits.

Why: each process keeps a bias of its own that none of its visits shows. On H200s, default runs
(12 visits a shape, in one process) differed in TF32/PEDANTIC by 0.11-0.15% (sd, pooled over 15
shapes) beyond what their visits gave: of 180 ordered run pairs, 132 and 135 had the other run's
median inside the interval where 171 and 170 were due. The bias is per process and per kernel:
trunk W_a and W_b (the same GEMM dimensions, their own operands) moved together from one process to
the next, and the one-set mamba2-130m shapes hardly moved. Within a process it did not go away when
each visit had fresh device pages (the pool emptied, a random spacer) or when every batch took
whole turns of the rotated operand sets (one batch size in every process): it is not where the
operands lie or how many GEMMs a batch holds. So a run that is to say what another run will give
samples processes, as it samples visits.

How: the first ``processes`` processes take ``share`` visits of every shape each (the run's
minimum of visits, split); a shape whose intervals are not yet within the target after them goes on
in further processes, each taking another share, up to the run's maximum of visits or its time
budget. The first process leaves its host operands in a temporary directory, which the next ones
map instead of drawing them again. Each process is a fresh interpreter (not a fork: the parent holds a CUDA context), one at a
time, so the GPU times one of them at a time. The batch size the first process calibrated is kept by the next.
Ctrl-C reaches the running process too: it keeps its whole visits, and no further process starts.
"""

from __future__ import annotations

import dataclasses
import math
import shutil
import tempfile

from .rounds import KeptRounds
from .stats import TARGET_HALF_WIDTH, StopReason
from .visits import MIN_VISITS_FOR_INTERVAL, Visited, VisitsOutcome, VisitsRun


def plan(min_visits: int, max_visits: int, processes: int) -> tuple[int, int]:
    """(visits a process takes of each shape, most processes a shape goes through): the minimum of visits
    split over ``processes`` (two visits at least, so each process shows its own spread), and as many
    more processes as ``max_visits`` allows."""
    share = max(MIN_VISITS_FOR_INTERVAL, math.ceil(min_visits / processes))
    return share, max(processes, max_visits // share)


def most_visits(min_visits: int, max_visits: int, processes: int) -> int:
    """The most visits a shape can take (the turns a progress bar counts): every process's share, or
    ``max_visits`` in one process."""
    if processes <= 1:
        return max(max_visits, min_visits, MIN_VISITS_FOR_INTERVAL)
    share, most = plan(min_visits, max_visits, processes)
    return share * most


class TimingProcessFailed(RuntimeError):
    """A bug in a timing process (its traceback follows)."""


class _Child:
    """A timing process started by :func:`_start`, as the run waits on it."""

    def __init__(self, popen):
        self.popen = popen
        self.pid = popen.pid

    def join(self) -> None:
        self.popen.wait()

    @property
    def exitcode(self) -> int | None:
        return self.popen.returncode


def _start(writer, options: dict) -> _Child:
    """Start a timing process: ``visit_process`` run by this interpreter, ``options`` pickled on its
    stdin, ``writer`` (a pipe's writing end) handed down by its file descriptor.

    A fresh interpreter, not multiprocessing's spawn: spawn runs the caller's main
    module again in the child, which a script without an ``if __name__ == "__main__"`` guard does
    not survive (it would start the run over)."""
    import os
    import pickle
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # where cublas_det is
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, (root, os.environ.get("PYTHONPATH")))))
    fd = writer.fileno()
    popen = subprocess.Popen([sys.executable, "-m", "cublas_det.timing.visit_process", str(fd)],
                             stdin=subprocess.PIPE, pass_fds=(fd,), env=env)
    try:
        popen.stdin.write(pickle.dumps(options))
    finally:
        popen.stdin.close()
    return _Child(popen)


def _pipe():
    import multiprocessing

    return multiprocessing.Pipe(duplex=False)


@dataclasses.dataclass
class _Shape:
    """One shape's visits so far, over processes."""

    rounds: KeptRounds
    visits: int = 0
    spent_s: float = 0.0


def visit_in_processes(shapes, configs, names: list[str], *, processes: int, min_visits: int, max_visits: int, budget_s: float,
                       seed: int = 0, aa_control: bool = True, failures: tuple | None = None, on_visit=None,
                       monitor=None, target_half_width: float = TARGET_HALF_WIDTH, start=_start,
                       pipe=_pipe, free_pool=None):
    """``engine.time_shapes``'s visits of ``shapes`` (arms ``names``, ``engine.arms_of``), taken in
    processes (see the module's docstring); a ``visits.Visited`` whose samples carry their process. ``on_visit(visit, going)`` is called after
    each turn of visits, counted over the run. ``start(writer, options)`` starts a process that runs
    ``visit_process.take_visits`` and reports on ``writer``, ``pipe()`` makes the (reader, writer), and
    ``free_pool()`` gives this process's cached device memory back (default: CuPy's pool):
    stand-ins in tests."""
    share, most = plan(min_visits, max_visits, processes)
    by_name = {shape.name: shape for shape in shapes}
    taken = {key: _Shape(KeptRounds(names)) for key in by_name}
    run = VisitsRun()
    calls, sets, visit_s = {}, {}, dict.fromkeys(by_name, 0.0)
    going = list(by_name)
    turn = 0  # visits of each shape, over the processes so far
    interrupted = False
    (free_pool or _free_pool)()  # this process's cached blocks go back to the driver: the timing processes need them
    store = tempfile.mkdtemp(prefix="cublas_det-operands-")  # the first process's host operands, for the next ones
    try:
        for number in range(most):
            options = {"shapes": [by_name[key] for key in going], "configs": configs, "seed": seed,
                       "min_visits": share, "max_visits": share, "budget_s": budget_s / processes,
                       "aa_control": aa_control, "failures": failures, "calls": dict(calls),
                       "budget_floor_visits": MIN_VISITS_FOR_INTERVAL, "operand_store": store}
            visited, interrupted = _one_process(options, monitor, start, pipe, turn, on_visit, len(going))
            if visited is not None:
                _absorb(visited, number, taken, run, calls, sets, visit_s)
                interrupted = interrupted or visited.run.interrupted
            turn += share
            going = _decide([key for key in going if key not in run.errors], taken, run, interrupted=interrupted,
                            enough=number + 1 >= processes, last=number + 1 >= most, budget_s=budget_s,
                            target_half_width=target_half_width)
            if on_visit is not None:
                on_visit(turn, len(going))
            if interrupted or not going:
                break
    except KeyboardInterrupt:  # between two processes' reports: what they reported stands
        interrupted = True
        _decide([key for key in going if key not in run.errors], taken, run, interrupted=True)
    finally:
        shutil.rmtree(store, ignore_errors=True)
    run.interrupted = interrupted
    return Visited(run, calls, sets, visit_s)


def _absorb(visited, number: int, taken: dict, run: VisitsRun, calls: dict, sets: dict, visit_s: dict) -> None:
    """Add what process ``number`` took to the run's shapes (its samples marked as that process's)."""
    calls.update(visited.calls)
    sets.update(visited.sets)
    for key, seconds in visited.visit_s.items():
        visit_s[key] += seconds
    run.errors.update(visited.run.errors)
    for key, outcome in visited.run.outcomes.items():
        shape = taken[key]
        shape.rounds.absorb(outcome.rounds, number)
        shape.visits += outcome.visits
        shape.spent_s += outcome.rounds_s


def _decide(going: list, taken: dict, run: VisitsRun, *, interrupted: bool, enough: bool = True,
            last: bool = True, budget_s: float = math.inf, target_half_width: float = TARGET_HALF_WIDTH) -> list:
    """The shapes of ``going`` that go on to the next process; the others get their outcome in ``run``
    (none with fewer than two visits: no interval)."""
    still = []
    for key in going:
        shape = taken[key]
        reason = _stop(shape, interrupted, enough, last, budget_s, target_half_width)
        if reason is None:
            still.append(key)
        elif shape.visits >= MIN_VISITS_FOR_INTERVAL:
            run.outcomes[key] = VisitsOutcome(shape.rounds, shape.rounds.ratios(), shape.visits, reason, shape.spent_s)
    return still


def _stop(shape: _Shape, interrupted: bool, enough: bool, last: bool, budget_s: float,
          target_half_width: float) -> StopReason | None:
    """Why a shape stops after a process, or None: it goes on in the next."""
    if interrupted:
        return StopReason.INTERRUPTED
    if not enough:
        return None
    if shape.visits >= MIN_VISITS_FOR_INTERVAL and all(
            r.half_width <= target_half_width for r in shape.rounds.ratios()):
        return StopReason.INTERVAL
    if last:
        return StopReason.ROUNDS
    if shape.spent_s >= budget_s:
        return StopReason.BUDGET
    return None


def _one_process(options: dict, monitor, start, pipe, turn: int, on_visit, going: int):
    """Run one timing process to its end: (its Visited, or None when it had none; whether Ctrl-C came)."""
    reader, writer = pipe()
    try:
        process = start(writer, options)
    finally:
        writer.close()  # this process's copy: the reader sees the end when the timing process's copy closes
    if monitor is not None and getattr(process, "pid", None):
        monitor.add_own(process.pid)
    interrupted, result = False, None
    while True:
        try:
            message = reader.recv()
        except EOFError:
            break
        except KeyboardInterrupt:  # the process got it too: it ends its visit turn and sends what it kept
            interrupted = True
            continue
        kind = message[0]
        if kind == "visit":
            _, visit, left = message
            if on_visit is not None and visit % options["max_visits"] and left:
                on_visit(turn + visit, going)  # a process's last turn is reported once the run has decided
        elif kind == "done":
            result = message[1]
            interrupted = interrupted or result is None
        elif kind == "failed":
            result = _all_failed(options["shapes"], message[1])
        elif kind == "error":
            _join(process)
            raise TimingProcessFailed(f"a timing process failed:\n{message[1]}")
    code = _join(process)
    if result is None and not interrupted:  # killed (out of host memory, a signal): every shape of it says so
        result = _all_failed(options["shapes"], f"timing failed: a timing process ended without its visits "
                                                f"(exit code {code})")
    return result, interrupted


def _all_failed(shapes, reason: str) -> Visited:
    """A process's Visited in which every shape it had failed for ``reason``."""
    return Visited(VisitsRun(errors={shape.name: reason for shape in shapes}), {}, {}, {})


def _join(process) -> int | None:
    join = getattr(process, "join", None)
    if join is not None:
        join()
    return getattr(process, "exitcode", None)


def _free_pool() -> None:
    import cupy

    cupy.get_default_memory_pool().free_all_blocks()

