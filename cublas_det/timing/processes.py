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
budget (each process has its part of the budget, and may stop a shape after two visits). Each
process is a fresh interpreter running ``visit_process`` (not a fork: this process holds a CUDA
context), one at a time, so the GPU times one of them at a time, on this process's current device.
The batch size the first process calibrated is kept by the next, and its host operands are left in
a temporary directory, which the next ones map instead of drawing them again.

Ctrl-C: a timing process ignores SIGINT; this process counts it while a timing process runs and
passes the first on through the process's stdin: the process ends before its next visit and
reports the visits it kept, and no further process starts. A second Ctrl-C ends the timing process
without its report. The end of its stdin (this process gone) ends it too.
"""

from __future__ import annotations

import dataclasses
import math
import os
import shutil
import tempfile

from .rounds import KeptRounds
from .stats import TARGET_HALF_WIDTH, StopReason
from .visits import MIN_VISITS_FOR_INTERVAL, Visited, VisitsOutcome, VisitsRun

LENGTH_BYTES = 8  # a timing process's options on its stdin: their length in this many bytes, then their pickle


def plan(min_visits: int, max_visits: int, processes: int) -> tuple[int, int]:
    """(visits a process takes of each shape, most processes a shape goes through): the minimum of visits
    split over ``processes`` (two visits at least, so each process shows its own spread), and as many
    more processes as ``max_visits`` allows."""
    if processes > most_processes(min_visits):
        raise ValueError(f"{processes} timing processes for {min_visits} visits: at most {most_processes(min_visits)} "
                         f"(each takes {MIN_VISITS_FOR_INTERVAL} visits at least)")
    share = max(MIN_VISITS_FOR_INTERVAL, math.ceil(min_visits / processes))
    return share, max(processes, max_visits // share)


def most_processes(min_visits: int) -> int:
    """The most timing processes ``min_visits`` visits can be split over (two visits each)."""
    return max(1, min_visits // MIN_VISITS_FOR_INTERVAL)


def most_visits(min_visits: int, max_visits: int, processes: int) -> int:
    """The most visits a shape can take (the turns a progress bar counts): every process's share, or
    ``max_visits`` in one process."""
    if processes <= 1:
        return max(max_visits, min_visits, MIN_VISITS_FOR_INTERVAL)
    share, most = plan(min_visits, max_visits, processes)
    return share * most


class TimingProcessFailed(RuntimeError):
    """A bug in a timing process (its traceback follows, or is on stderr above)."""


class _Child:
    """A timing process started by :func:`_start`, as the run waits on it and stops it."""

    def __init__(self, popen):
        self.popen = popen
        self.pid = popen.pid

    def join(self) -> None:
        self.popen.wait()
        self.popen.stdin.close()  # its lifeline, let go once it ended

    def interrupt(self) -> None:
        """Ctrl-C, passed on: a byte on its stdin; it ends its turn of visits and reports what it kept."""
        try:
            self.popen.stdin.write(b"stop\n")
            self.popen.stdin.flush()
        except OSError:  # it has ended already
            pass

    def kill(self) -> None:
        if self.popen.poll() is None:
            self.popen.kill()

    @property
    def exitcode(self) -> int | None:
        return self.popen.returncode


def _start(writer, options: dict, prelude: str = "") -> _Child:
    """Start a timing process: ``visit_process.main`` in a fresh interpreter of this Python, on the
    copy of cublas_det this process runs, ``writer`` (a pipe's writing end) handed down by its file
    descriptor, ``options`` on its stdin (their length, then their pickle), which stays open: the run
    writes there to stop it, and its end ends the process (this process died, or let go of it).

    A fresh interpreter, not multiprocessing's spawn: spawn runs the caller's main module again in
    the child, which a script without an ``if __name__ == "__main__"`` guard does not survive (it
    would start the run over). SIGINT is ignored while it starts, so that it starts ignoring it:
    the run passes Ctrl-C on itself (:class:`_CtrlC`). ``prelude``: Python run in the process before
    its main (tests replace its GPU work there)."""
    import pickle
    import signal
    import subprocess
    import sys
    import threading

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # holds cublas_det
    code = "\n".join(("import signal, sys", "signal.signal(signal.SIGINT, signal.SIG_IGN)",
                      f"if {root!r} not in sys.path: sys.path.insert(0, {root!r})", prelude,
                      "from cublas_det.timing.visit_process import main", "main()"))
    payload = pickle.dumps(options)
    in_main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if in_main else None
    try:
        popen = subprocess.Popen([sys.executable, "-c", code, str(writer.fileno())], stdin=subprocess.PIPE,
                                 pass_fds=(writer.fileno(),))
    finally:
        if in_main:
            signal.signal(signal.SIGINT, previous)
    try:
        popen.stdin.write(len(payload).to_bytes(LENGTH_BYTES, "big") + payload)
        popen.stdin.flush()
    except BaseException:
        popen.kill()
        popen.wait()
        raise
    return _Child(popen)


class _CtrlC:
    """While a timing process runs, SIGINT is counted and passed on instead of raised wherever this
    process happens to be (starting the process, reading its report): the first asks the process to
    end its turn and report, a second ends it. Where no handler can be set (not the main thread), a
    KeyboardInterrupt that reaches the run is counted through :meth:`caught`."""

    def __init__(self):
        self.count, self.passed, self.process, self.previous = 0, 0, None, None

    def __enter__(self):
        import signal
        import threading

        if threading.current_thread() is threading.main_thread():
            self.previous = signal.signal(signal.SIGINT, lambda signum, frame: self.caught())
        return self

    def __exit__(self, *exc):
        import signal

        if self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)
        return False

    def caught(self) -> None:
        self.count += 1
        self._pass_on()

    def hold(self, process) -> None:
        """The process to pass Ctrl-C on to (None: it ended); one that came before is passed on now."""
        self.process = process
        self._pass_on()

    def _pass_on(self) -> None:
        while self.process is not None and self.passed < self.count:
            if self.passed == 0:
                self.process.interrupt()
            else:
                self.process.kill()
            self.passed += 1


def _pipe():
    import multiprocessing

    return multiprocessing.Pipe(duplex=False)


def _free_pool() -> None:
    import cupy

    cupy.get_default_memory_pool().free_all_blocks()


STORE_PREFIX = "cublas_det-operands-"  # then this process's PID: a store whose run was killed is found again


def _make_store() -> str | None:
    """A temporary directory for the processes' host operands; None where none can be made (each
    process then draws its own). Stores that killed runs left behind (their process is gone, no
    ``finally`` ran) are removed first."""
    try:
        base = tempfile.gettempdir()
        for entry in os.scandir(base):
            pid = entry.name[len(STORE_PREFIX):].split("-", 1)[0]
            if entry.name.startswith(STORE_PREFIX) and pid.isdigit() and not _alive(int(pid)):
                shutil.rmtree(entry.path, ignore_errors=True)
        return tempfile.mkdtemp(prefix=f"{STORE_PREFIX}{os.getpid()}-", dir=base)
    except OSError:
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's
        return True
    return True


@dataclasses.dataclass
class _Shape:
    """One shape's visits so far, over processes."""

    rounds: KeptRounds
    visits: int = 0
    spent_s: float = 0.0


def visit_in_processes(shapes, configs, names: list[str], *, processes: int, min_visits: int, max_visits: int,
                       budget_s: float, seed: int = 0, aa_control: bool = True, failures: tuple | None = None,
                       on_visit=None, monitor=None, device: int | None = None, clock_floor_mhz: float | None = None,
                       target_half_width: float = TARGET_HALF_WIDTH, start=_start, pipe=_pipe,
                       free_pool=_free_pool) -> Visited:
    """``engine.time_shapes``'s visits of ``shapes`` (arms ``names``, ``engine.arms_of``), taken in
    processes (see the module's docstring) on ``device`` (None: the processes' default); a
    ``visits.Visited`` whose samples carry their process. ``on_visit(visit, going)`` is called after
    each turn of visits, counted over the run. ``start(writer, options)`` starts a process that runs
    ``visit_process.take_visits`` and reports on ``writer``, ``pipe()`` makes the (reader, writer),
    and ``free_pool()`` gives this process's cached device memory back: stand-ins in tests."""
    share, most = plan(min_visits, max_visits, processes)
    by_name = {shape.name: shape for shape in shapes}
    taken = {key: _Shape(KeptRounds(names)) for key in by_name}
    run = VisitsRun()
    calls, sets, visit_s = {}, {}, dict.fromkeys(by_name, 0.0)
    going = list(by_name)
    turn = 0  # visits of each shape, over the processes so far
    interrupted = False
    free_pool()  # this process's cached blocks go back to the driver: the timing processes need them
    store = _make_store()
    try:
        for number in range(most):
            options = {"shapes": [by_name[key] for key in going], "configs": configs, "seed": seed,
                       "min_visits": share, "max_visits": share, "budget_s": budget_s / processes,
                       "aa_control": aa_control, "failures": failures, "calls": dict(calls),
                       "budget_floor_visits": MIN_VISITS_FOR_INTERVAL, "operand_store": store, "device": device,
                       "clock_floor_mhz": clock_floor_mhz}
            visited, interrupted, shown = _one_process(options, monitor, start, pipe, turn, on_visit, len(going))
            if visited is not None:
                _absorb(visited, number, taken, run, calls, sets, visit_s)
                interrupted = interrupted or visited.run.interrupted
            if on_visit is not None:  # the turns the process did not report (it stopped its shapes early)
                for visit in range(shown + 1, share):
                    on_visit(turn + visit, len(going))
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
        if store is not None:
            shutil.rmtree(store, ignore_errors=True)
    run.interrupted = interrupted
    return Visited(run, calls, sets, visit_s)


def _absorb(visited, number: int, taken: dict, run: VisitsRun, calls: dict, sets: dict, visit_s: dict) -> None:
    """Add what process ``number`` took to the run's shapes (its samples marked as that process's).
    A shape that failed in it fails for the run, as a shape failing in a later visit does in one
    process: its timing is suspect."""
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
        ratios = shape.rounds.ratios() if shape.visits >= MIN_VISITS_FOR_INTERVAL else ()
        reason = _stop(shape, ratios, interrupted, enough, last, budget_s, target_half_width)
        if reason is None:
            still.append(key)
        elif shape.visits >= MIN_VISITS_FOR_INTERVAL:
            run.outcomes[key] = VisitsOutcome(shape.rounds, ratios, shape.visits, reason, shape.spent_s)
    return still


def _stop(shape: _Shape, ratios: tuple, interrupted: bool, enough: bool, last: bool, budget_s: float,
          target_half_width: float) -> StopReason | None:
    """Why a shape stops after a process, or None: it goes on in the next (``ratios``: its ratios so
    far, none before two visits)."""
    if interrupted:
        return StopReason.INTERRUPTED
    if not enough:
        return None
    if shape.visits >= MIN_VISITS_FOR_INTERVAL and all(r.half_width <= target_half_width for r in ratios):
        return StopReason.INTERVAL
    if last:
        return StopReason.ROUNDS
    if shape.spent_s >= budget_s:
        return StopReason.BUDGET
    return None


def _one_process(options: dict, monitor, start, pipe, turn: int, on_visit, going: int):
    """Run one timing process to its end: (its Visited, or None when it had none; whether Ctrl-C came;
    the last of its turns reported through ``on_visit``)."""
    reader, writer = pipe()
    result, bug, shown = None, None, 0
    with _CtrlC() as ctrl_c:
        try:
            process = start(writer, options)
        finally:
            writer.close()  # this process's copy: the reader sees the end when the timing process's copy closes
        ended = False
        try:
            ctrl_c.hold(process)
            if monitor is not None and getattr(process, "pid", None):
                monitor.add_own(process.pid)
            while True:
                try:
                    message = reader.recv()
                except (EOFError, OSError):  # it ended (or was ended in the middle of a message)
                    break
                except KeyboardInterrupt:  # where no handler could be set
                    ctrl_c.caught()
                    continue
                try:
                    kind = message[0]
                    if kind == "visit":
                        _, visit, left = message
                        if visit < options["max_visits"] and left:  # its last turn: reported once the run decided
                            shown = visit
                            if on_visit is not None:
                                on_visit(turn + visit, going)
                    elif kind == "done":
                        result = message[1]
                    elif kind == "failed":
                        result = _all_failed(options["shapes"], message[1])
                    elif kind == "error":
                        bug = message[1]
                except KeyboardInterrupt:
                    ctrl_c.caught()
            ended = True
        finally:
            if not ended:  # leaving on an exception: the process goes too, not left on the GPU
                process.kill()
            code = _wait(process)
            ctrl_c.hold(None)
        interrupted = ctrl_c.count > 0
    if bug is not None:
        raise TimingProcessFailed(f"a timing process failed:\n{bug}")
    if result is None and not interrupted:
        if code is not None and code > 0:  # Python ended it with an exception it could not report
            raise TimingProcessFailed(f"a timing process ended with exit code {code} without its visits (its "
                                      f"traceback is above)")
        # killed by a signal (the host's memory, another process): each of its shapes says so
        result = _all_failed(options["shapes"], f"timing failed: a timing process ended without its visits "
                                                f"(exit code {code})")
    return result, interrupted, shown


def _wait(process) -> int | None:
    """Wait for the process to end (through Ctrl-C: it has been asked to end already); its exit code."""
    while True:
        try:
            process.join()
            return getattr(process, "exitcode", None)
        except KeyboardInterrupt:
            process.kill()


def _all_failed(shapes, reason: str) -> Visited:
    """A process's Visited in which every shape it had failed for ``reason``."""
    return Visited(VisitsRun(errors={shape.name: reason for shape in shapes}), {}, {}, {})
