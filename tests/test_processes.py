"""A run's timing spread over processes, apart from the GPU: each process takes a share of every shape's
visits, the samples carry their process, the intervals hold the processes' own biases, shapes not yet
within the target go on in further processes, and a process's failure or Ctrl-C is reported as such.

The processes are stand-ins: threads running the real process body (``visit_process.take_visits``) over a
real pipe, with its ``visit_shapes`` replaced by synthetic visits in which each process has a bias;
one test starts real interpreters, which fail on a machine without a GPU, and says so."""

import os
import pathlib
import random
import statistics
import threading

import pytest

from cublas_det.shapes import parse_shape
from cublas_det.timing import Sample, StopReason, engine, processes, visit_process
from cublas_det.timing.rounds import KeptRounds
from cublas_det.timing.stats import between_term, median_ci, widened_ci
from cublas_det.timing.visits import Visited, VisitsOutcome, VisitsRun

MODES = ["PEDANTIC", "TF32"]
NAMES = ["PEDANTIC", "TF32", "PEDANTIC-AA"]  # engine.arms_of(MODES): the A/A arm repeats PEDANTIC
TRUE_RATIO = 0.6
SHAPES = [parse_shape("64x32x16"), parse_shape("32x64x16:tn")]


class ThreadProcess(threading.Thread):
    """What ``processes`` needs of a process: started at once, a pid, join, an exit code, and being
    asked to stop (Ctrl-C passed on) or ended."""

    pid = None
    exitcode = 0

    def __init__(self, writer, options):
        super().__init__(daemon=True)
        self.writer, self.options = writer, options
        self.asked_to_stop = threading.Event()
        self.killed = False

    def run(self):
        visit_process.take_visits(self.writer, self.options, stop=self.asked_to_stop.is_set)

    def interrupt(self):
        self.asked_to_stop.set()

    def kill(self):
        self.killed = True


def _start(writer, options):
    """The process body in a thread, with its own copy of the pipe's writing end (the run closes its
    copy); asked to stop, it is told through ``stop()`` as the real one is through its stdin."""
    from multiprocessing.connection import Connection

    process = ThreadProcess(Connection(os.dup(writer.fileno()), readable=False), options)
    process.start()
    return process


def _pipe():
    import multiprocessing

    return multiprocessing.Pipe(duplex=False)


class Processes:
    """``engine.visit_shapes`` in stand-in processes: every visit one Williams cycle of rounds in which
    TF32 takes TRUE_RATIO x PEDANTIC's time times the process's bias (sd ``process_sd``) and the
    visit's (``visit_sd``). ``wide``: shapes whose visits spread by 2%, too much for the target."""

    def __init__(self, process_sd=0.0, visit_sd=0.002, seed=0, wide=(), failing=None, interrupt_in=None,
                 bug_in=None, early_in=None):
        self.rng = random.Random(seed)
        self.process_sd, self.visit_sd, self.wide = process_sd, visit_sd, set(wide)
        self.failing, self.interrupt_in, self.bug_in = failing or {}, interrupt_in, bug_in
        self.early_in = early_in  # a process whose shapes all stop after 2 visits (their part of the budget)
        self.asked = []  # (shape names, calls given, visits, budget_s) of each process
        self.stores = []  # the operand store each process was given
        self.floors = []  # the clock floor each process was given (the run's: 75% of the default clock)

    def visit_shapes(self, shapes, configs, *, seed, min_visits, max_visits, budget_s, aa_control, failures,
                     calls, budget_floor_visits, operand_store, stop, clock_floor_mhz, on_visit):
        """As ``engine.visit_shapes`` returns; in process ``interrupt_in`` it ends after its second turn
        once the run passes a Ctrl-C on (a terminal's reaches the run only)."""
        number = len(self.asked)
        assert os.path.isdir(operand_store)
        self.stores.append(operand_store)
        self.floors.append(clock_floor_mhz)
        self.asked.append(([s.name for s in shapes], dict(calls), (min_visits, max_visits), budget_s))
        if number == self.bug_in:
            raise ZeroDivisionError("a bug in a timing process")
        bias = 1 + self.rng.gauss(0, self.process_sd)
        run = VisitsRun()
        cycle = 6  # a Williams cycle of 3 arms
        kept = {s.name: KeptRounds(NAMES) for s in shapes}
        visits = 2 if number == self.early_in else max_visits
        for visit in range(visits):
            for shape in shapes:
                if (shape.name, number) in self.failing:
                    run.errors[shape.name] = self.failing[shape.name, number]
                    continue
                spread = 0.02 if shape.name in self.wide else self.visit_sd
                moment = bias * (1 + self.rng.gauss(0, spread))
                for _ in range(cycle):
                    kept[shape.name].kept["PEDANTIC"].append(Sample(2e-5, 3e-5, 1980.0, True, visit))
                    kept[shape.name].kept["TF32"].append(Sample(2e-5 * TRUE_RATIO * moment, 3e-5, 1980.0, True, visit))
                    kept[shape.name].kept["PEDANTIC-AA"].append(Sample(2e-5, 3e-5, 1980.0, True, visit))
            on_visit(visit + 1, 0 if visit + 1 == visits else len(shapes))
            if number == self.interrupt_in and visit == 1:
                assert threading.current_thread().asked_to_stop.wait(10) and stop()  # the run passed Ctrl-C on
                run.interrupted = True  # what run_visits returns then: whole visits kept
                break
        for shape in shapes:
            if shape.name not in run.errors:
                rounds = kept[shape.name]
                run.outcomes[shape.name] = VisitsOutcome(rounds, rounds.ratios(), rounds.rounds // cycle,
                                                         StopReason.ROUNDS, 0.1 * rounds.rounds)
        return Visited(run, {s.name: calls.get(s.name, 100 + number) for s in shapes},
                              {s.name: 7 for s in shapes}, {s.name: 0.5 for s in shapes})


@pytest.fixture
def stand_in(monkeypatch):
    def install(**options):
        fake = Processes(**options)
        monkeypatch.setattr(engine, "visit_shapes", fake.visit_shapes)
        monkeypatch.setattr(engine, "warm_up", lambda seconds: None)
        return fake

    return install


def _visit(**options):
    options = {"processes": 3, "min_visits": 12, "max_visits": 16, "budget_s": 1e9, "start": _start, "pipe": _pipe,
               "free_pool": lambda: None, **options}
    return processes.visit_in_processes(SHAPES, MODES, NAMES, **options)


def test_each_process_takes_a_share_of_every_shapes_visits_and_its_samples_carry_it(stand_in):
    fake = stand_in()
    seen = []
    visited = _visit(on_visit=lambda visit, going: seen.append((visit, going)), clock_floor_mhz=1485.0)
    names = [s.name for s in SHAPES]
    assert fake.floors == [1485.0] * 3
    # 3 processes of 4 visits each; the batch size of the first process is given to the next ones
    assert [asked[0] for asked in fake.asked] == [names] * 3
    assert [asked[2] for asked in fake.asked] == [(4, 4)] * 3
    assert fake.asked[0][1] == {} and fake.asked[1][1] == fake.asked[2][1] == {n: 100 for n in names}
    assert fake.asked[0][3] == pytest.approx(1e9 / 3)  # each process its part of the budget
    assert visited.calls == {n: 100 for n in names} and visited.sets == {n: 7 for n in names}
    assert len(set(fake.stores)) == 1 and not os.path.exists(fake.stores[0])  # one store, gone after the run
    assert visited.visit_s == {n: 1.5 for n in names}
    # progress: a turn of visits at a time, counted over the run; the last says that nothing goes on
    assert seen == [(v, 2) for v in range(1, 12)] + [(12, 0)]
    assert not visited.run.errors and not visited.run.interrupted
    for name in names:
        outcome = visited.run.outcomes[name]
        assert outcome.visits == 12 and outcome.stop_reason == StopReason.INTERVAL
        samples = outcome.rounds.kept["TF32"]
        assert [s.process for s in samples] == [p for p in range(3) for _ in range(24)]
        assert [s.setup for s in samples] == [v for v in range(12) for _ in range(6)]  # numbered on over the run
        assert outcome.ratios == outcome.rounds.ratios() and outcome.ratios[0].setup_dof == 9  # 12 visits - 3


def test_a_shape_not_yet_within_the_target_goes_on_in_another_process(stand_in):
    fake = stand_in(wide={SHAPES[1].name})
    visited = _visit()
    assert [asked[0] for asked in fake.asked] == [[s.name for s in SHAPES]] * 3 + [[SHAPES[1].name]]
    assert visited.run.outcomes[SHAPES[0].name].visits == 12
    wide = visited.run.outcomes[SHAPES[1].name]
    assert wide.visits == 16 and wide.stop_reason == StopReason.ROUNDS  # max_visits 16: no fifth process
    assert {s.process for s in wide.rounds.kept["TF32"]} == {0, 1, 2, 3}


def test_the_budget_stops_a_shape_after_the_first_processes():
    shape = processes._Shape(KeptRounds(NAMES), visits=12, spent_s=3.0)
    for setup in range(12):
        for name, ratio in zip(NAMES, (1.0, 0.5 + 0.05 * (setup % 2), 1.0)):
            shape.rounds.kept[name] += [Sample(ratio, 1.0, None, True, setup, setup // 4)] * 6
    ratios = shape.rounds.ratios()
    assert processes._stop(shape, ratios, False, False, False, 2.5, 0.005) is None  # not before `processes` of them
    assert processes._stop(shape, ratios, False, True, False, 2.5, 0.005) == StopReason.BUDGET
    assert processes._stop(shape, ratios, False, True, False, 9.0, 0.005) is None
    assert processes._stop(shape, ratios, False, True, True, 9.0, 0.005) == StopReason.ROUNDS
    assert processes._stop(shape, ratios, True, False, False, 9.0, 0.005) == StopReason.INTERRUPTED


def test_a_shape_whose_timing_failed_in_a_process_is_reported_and_not_timed_again(stand_in):
    fake = stand_in(failing={(SHAPES[0].name, 1): "timing failed: OutOfMemoryError: out of memory"})
    visited = _visit()
    assert visited.run.errors == {SHAPES[0].name: "timing failed: OutOfMemoryError: out of memory"}
    assert SHAPES[0].name not in visited.run.outcomes
    assert [asked[0] for asked in fake.asked][2] == [SHAPES[1].name]
    assert visited.run.outcomes[SHAPES[1].name].visits == 12


def test_ctrl_c_in_a_process_keeps_its_whole_visits_and_starts_no_other(stand_in):
    fake = stand_in(interrupt_in=1)
    seen = []

    def on_visit(visit, going):  # the terminal's Ctrl-C reaches the run while it shows the second process's first turn
        seen.append(visit)
        if visit == 5:
            raise KeyboardInterrupt

    visited = _visit(on_visit=on_visit)
    assert len(fake.asked) == 2 and visited.run.interrupted
    for shape in SHAPES:
        outcome = visited.run.outcomes[shape.name]
        assert outcome.stop_reason == StopReason.INTERRUPTED and outcome.visits == 4 + 2


def test_a_process_that_stopped_its_shapes_early_still_counts_every_turn_of_the_progress(stand_in):
    stand_in(early_in=1)  # the second process stops its shapes after 2 visits (its part of the budget)
    seen = []
    visited = _visit(on_visit=lambda visit, going: seen.append((visit, going)))
    assert [visit for visit, _ in seen] == list(range(1, 13))  # every turn a step: the bar reaches its end
    assert seen[-1] == (12, 0) and all(o.visits == 4 + 2 + 4 for o in visited.run.outcomes.values())


def test_a_bug_in_a_timing_process_is_raised_with_its_traceback(stand_in):
    stand_in(bug_in=1)
    with pytest.raises(processes.TimingProcessFailed, match="(?s)a timing process failed:.*ZeroDivisionError: a bug"):
        _visit()


def test_a_process_that_dies_without_a_word_fails_its_shapes_with_its_exit_code():
    class Died:
        pid, exitcode = None, -9

        def join(self):
            return None

    def start(writer, options):  # the process dies at once: its copy of the pipe goes with it
        return Died()

    visited = _visit(start=start)
    reason = "timing failed: a timing process ended without its visits (exit code -9)"
    assert visited.run.errors == {s.name: reason for s in SHAPES} and not visited.run.outcomes


def test_a_gpu_that_fails_a_process_before_its_visits_fails_its_shapes_in_one_line(stand_in, monkeypatch):
    class NoGpu(Exception):
        pass

    def warm_up(seconds):
        raise NoGpu("no CUDA-capable device is detected")

    stand_in()
    monkeypatch.setattr(engine, "warm_up", warm_up)
    visited = _visit(failures=(NoGpu,))
    assert visited.run.errors == {s.name: "timing failed: NoGpu: no CUDA-capable device is detected" for s in SHAPES}


def test_a_process_that_ends_with_an_error_of_its_own_is_a_bug_and_one_killed_fails_its_shapes():
    class Ended:
        pid = None

        def __init__(self, code):
            self.exitcode = code

        def join(self):
            return None

    with pytest.raises(processes.TimingProcessFailed, match="exit code 1 without its visits"):
        _visit(start=lambda writer, options: Ended(1))  # Python's own exit after an exception it printed
    visited = _visit(start=lambda writer, options: Ended(-9))
    assert set(visited.run.errors) == {s.name for s in SHAPES}


def test_the_plan_splits_the_minimum_and_allows_more_processes_up_to_the_maximum():
    assert processes.plan(12, 16, 3) == (4, 4)
    assert processes.plan(12, 15, 3) == (4, 3)  # no room for a fourth share
    assert processes.plan(24, 24, 3) == (8, 3)
    assert processes.plan(4, 6, 2) == (2, 3)  # two visits a process at least
    assert processes.most_processes(12) == 6 and processes.most_processes(4) == 2 and processes.most_processes(1) == 1
    with pytest.raises(ValueError, match="3 timing processes for 4 visits: at most 2"):
        processes.plan(4, 6, 3)
    assert processes.most_visits(12, 16, 3) == 16 and processes.most_visits(12, 16, 1) == 16
    assert processes.most_visits(4, 6, 1) == 6


def _two_level(rng, processes_count, visits, process_sd, visit_sd):
    """Per-round ratios, setups and processes of one synthetic run (4 rounds a visit)."""
    values, setups, owners = [], [], []
    for p in range(processes_count):
        bias = rng.gauss(0, process_sd)
        for v in range(visits):
            moment = bias + rng.gauss(0, visit_sd)
            for _ in range(4):
                values.append(TRUE_RATIO * (1 + moment + rng.gauss(0, 0.0005)))
                setups.append(p * visits + v)
                owners.append(p)
    return values, setups, owners


def test_intervals_over_processes_hold_the_true_ratio_where_intervals_over_visits_alone_do_not():
    """The checker of the statistic: with a bias per process (0.13% sd, beyond visits of 0.3%, as on the
    H200), the interval of 12 visits in one process (as runs were timed before processes) misses the
    truth far more often than 5%; 3 processes of 4 visits, with the two-level interval, hold it as a
    95% interval should."""
    rng = random.Random(7)
    held_one = held_three = 0
    runs = 400
    for _ in range(runs):
        values, setups, _ = _two_level(rng, 1, 12, 0.0013, 0.003)
        one = widened_ci(values, setups)
        values, setups, owners = _two_level(rng, 3, 4, 0.0013, 0.003)
        three = widened_ci(values, setups, owners)
        held_one += one[0] <= TRUE_RATIO <= one[1]
        held_three += three[0] <= TRUE_RATIO <= three[1]
    assert held_three / runs >= 0.93
    assert held_one / runs <= 0.85


def test_the_two_level_term_takes_the_visits_within_processes_while_the_processes_agree():
    # 3 processes of 4 visits, each visit 4 equal rounds: within a process the visits spread by
    # +-0.3%; the processes' means agree to 0.01%, less than their visits explain
    values, setups, owners = [], [], []
    for p, offset in enumerate((0.0, 0.0001, -0.0001)):
        for v, moment in enumerate((0.003, -0.003, 0.003, -0.003)):
            values += [1.0 + offset + moment] * 4
            setups += [p * 4 + v] * 4
            owners += [p] * 4
    half, dof = between_term(values, setups, owners)
    within = 12 * 0.003 ** 2 / 9  # pooled variance of the visit medians about their process's mean
    assert dof == 9 and half == pytest.approx(2.262 * (within / 12) ** 0.5)
    # the same visits with the processes apart by 1%: the processes decide, with 2 degrees of freedom
    apart = [x + 0.01 * o for x, o in zip(values, owners)]
    half, dof = between_term(apart, setups, owners)
    means = [1.0, 1.0101, 1.0199]
    assert dof == 2 and half == pytest.approx(4.303 * (statistics.variance(means) / 3) ** 0.5)


def test_visits_of_one_process_keep_the_one_level_term():
    rng = random.Random(3)
    values, setups, _ = _two_level(rng, 1, 12, 0.0, 0.003)
    medians = [statistics.median(values[i:i + 4]) for i in range(0, len(values), 4)]
    half, dof = between_term(values, setups)  # t(V-1) sd / sqrt(V), as before processes
    assert dof == 11 and half == pytest.approx(2.201 * statistics.stdev(medians) / 12 ** 0.5)
    assert between_term(values, setups, [0] * len(values)) == (half, dof)  # one process named: the same
    assert between_term(values, [0] * len(values)) == (0.0, 0)  # one setup: no term
    assert widened_ci(values) == median_ci(values)


def test_rounds_of_another_process_are_merged_with_their_process_and_setups_numbered_on():
    mine, theirs = KeptRounds(NAMES), KeptRounds(NAMES)
    for rounds, count in ((mine, 2), (theirs, 3)):
        for setup in range(count):
            for name in NAMES:
                rounds.kept[name].append(Sample(1.0, 1.0, None, True, setup))
    theirs.discards = theirs.discards.add("throttled", kept=False)
    mine.absorb(theirs, process=1)
    assert [s.setup for s in mine.kept["TF32"]] == [0, 1, 2, 3, 4]
    assert [s.process for s in mine.kept["TF32"]] == [0, 0, 1, 1, 1]
    assert mine.discards.throttled == 1
    with pytest.raises(ValueError, match="cannot merge rounds of arms"):
        mine.absorb(KeptRounds(["PEDANTIC", "TF32"]), process=2)


def test_a_real_timing_process_reports_its_failure_even_from_a_script_without_a_main_guard(tmp_path):
    """The timing processes are fresh interpreters on ``cublas_det.timing.visit_process``: a caller's script
    without ``if __name__ == "__main__"`` is not run again in them (multiprocessing's spawn would). On
    this machine the process cannot reach a GPU; its traceback comes back to the run, which raises it."""
    import subprocess
    import sys

    script = tmp_path / "unguarded.py"
    script.write_text(
        "import sys\n"
        "from cublas_det.shapes import parse_shape\n"
        "from cublas_det.timing import processes\n"
        "print('script started', flush=True)\n"
        "try:\n"
        "    visited = processes.visit_in_processes([parse_shape('64x32x16')], ['pedantic', 'tf32'], ['PEDANTIC', 'TF32', 'PEDANTIC-AA'], processes=2,\n"
        "                                           min_visits=4, max_visits=4, budget_s=1.0, free_pool=lambda: None)\n"
        "    print('shape failed:', visited.run.errors['64x32x16:nn'])\n"
        "except processes.TimingProcessFailed as err:\n"
        "    print('process failed:', str(err).strip().splitlines()[-1])\n")
    root = pathlib.Path(__file__).resolve().parent.parent
    env = dict(os.environ, PYTHONPATH=str(root), CUDA_VISIBLE_DEVICES="")
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, env=env,
                            cwd=tmp_path, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("script started") == 1  # not run again by the timing process
    # CuPy but no usable driver: the GPU's failure, one line for the shape; no CuPy at all: a process's bug
    assert "shape failed: timing failed: CUDARuntimeError" in result.stdout or (
        "process failed: ModuleNotFoundError: No module named 'cupy'" in result.stdout), result.stdout


CHILD_PRELUDE = '''
import contextlib, time
from cublas_det.timing import engine
from cublas_det.timing.rounds import Sample
from cublas_det.timing.visits import Visited, run_visits

def visit_shapes(shapes, configs, *, seed, min_visits, max_visits, budget_s, aa_control, failures, calls,
                 budget_floor_visits, operand_store, stop, clock_floor_mhz, on_visit):
    names = list(engine.arms_of(configs, aa_control))

    @contextlib.contextmanager
    def open_visit(key, visit):
        time.sleep(0.15)  # a visit's setup and rounds, on no GPU
        yield lambda order, setup: {n: Sample(2e-5 * (0.6 if n == "TF32" else 1), 3e-5, 1980.0, True, setup)
                                    for n in order}

    run = run_visits([s.name for s in shapes], names, open_visit, min_visits=min_visits, max_visits=max_visits,
                     budget_s=budget_s, failures=(), on_visit=on_visit, stop=stop)
    return Visited(run, {s.name: 100 for s in shapes}, {s.name: 7 for s in shapes}, {s.name: 1.0 for s in shapes})

engine.visit_shapes = visit_shapes
engine.warm_up = lambda seconds: None
'''

RUN_SCRIPT = '''
import functools, json, sys
from cublas_det.shapes import parse_shape
from cublas_det.timing import processes
shapes = [parse_shape("64x32x16"), parse_shape("32x64x16:tn")]
start = functools.partial(processes._start, prelude=sys.argv[1])
visited = processes.visit_in_processes(
    shapes, ["pedantic", "tf32"], ["PEDANTIC", "TF32", "PEDANTIC-AA"], processes=2, min_visits=12, max_visits=12,
    budget_s=1e9, start=start, free_pool=lambda: None,
    on_visit=lambda visit, going: print("visit", visit, flush=True))
print(json.dumps({"interrupted": visited.run.interrupted, "errors": visited.run.errors,
                  "visits": {k: [o.visits, o.stop_reason.value, sorted({s.process for s in o.rounds.kept["TF32"]})]
                             for k, o in visited.run.outcomes.items()}}), flush=True)
'''


def _run_in_processes(tmp_path):
    """The run of RUN_SCRIPT in a session of its own; its timing processes carry tmp_path's name (pgrep)."""
    import subprocess
    import sys

    script = tmp_path / "run.py"
    script.write_text(RUN_SCRIPT)
    # TMPDIR: the operand store of a run killed outright stays behind (the next run sweeps it), here
    env = dict(os.environ, PYTHONPATH=str(pathlib.Path(__file__).resolve().parent.parent), TMPDIR=str(tmp_path))
    return subprocess.Popen([sys.executable, str(script), CHILD_PRELUDE + f"# {tmp_path.name}"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path,
                            start_new_session=True)


def _timing_processes(tmp_path, run) -> list:
    """The PIDs of the run's timing processes alive (the run's own command line names the token too)."""
    token = f"# {tmp_path.name}".encode()
    found = []
    for entry in pathlib.Path("/proc").iterdir():
        if entry.name.isdigit() and entry.name != str(run.pid):
            try:
                if token in (entry / "cmdline").read_bytes():
                    found.append(entry.name)
            except OSError:  # ended meanwhile
                pass
    return found


def _after_visit(run, first: str) -> None:
    for line in run.stdout:
        if line.startswith(first):
            return


def test_a_terminals_ctrl_c_ends_the_running_process_after_its_visit_and_keeps_its_visits(tmp_path):
    """End to end, in real interpreters (the timing processes' GPU work replaced by 0.15 s visits): a
    Ctrl-C sent to the run's process group while its first timing process runs. The process ignores
    the signal itself; the run passes it on, and the process ends before its next visit, reporting
    the whole visits it took; no second process starts, nothing is printed as a traceback, and no
    timing process is left."""
    import json
    import signal

    run = _run_in_processes(tmp_path)
    try:
        _after_visit(run, "visit 2")  # the first process's second turn of visits
        os.killpg(run.pid, signal.SIGINT)  # as a terminal sends it: to the whole group
        out, err = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
    assert run.returncode == 0, err
    result = json.loads(out.strip().splitlines()[-1])
    assert result["interrupted"] and not result["errors"]
    for visits, reason, taken_by in result["visits"].values():
        assert 2 <= visits < 6 and reason == "interrupted" and taken_by == [0]  # no second process
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert _timing_processes(tmp_path, run) == []


def test_a_timing_process_ends_when_its_run_is_killed(tmp_path):
    """The run killed outright (no finally, no word to its process): the process sees its stdin end (or
    its next report fail) and ends, rather than timing on for nobody."""
    import signal
    import time

    run = _run_in_processes(tmp_path)
    try:
        _after_visit(run, "visit 1")
        assert len(_timing_processes(tmp_path, run)) == 1
        os.kill(run.pid, signal.SIGKILL)  # the run only: its timing process is not signalled
        run.wait(timeout=30)
        deadline = time.monotonic() + 10
        while _timing_processes(tmp_path, run) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _timing_processes(tmp_path, run) == []
        assert [p.name for p in tmp_path.glob("cublas_det-operands-*")] != []  # what the sweep is for
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)


def test_a_store_left_by_a_killed_run_is_swept_and_a_live_runs_is_not(tmp_path, monkeypatch):
    import subprocess
    import sys
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                           check=True)
    dead = tmp_path / f"{processes.STORE_PREFIX}{ended.stdout.strip()}-abc"
    live = tmp_path / f"{processes.STORE_PREFIX}{os.getppid()}-def"
    for store in (dead, live):
        store.mkdir()
        (store / "seed0_float32_64x32x16_nn_a.bin").write_bytes(b"x")
    made = processes._make_store()
    assert not dead.exists() and live.exists()
    assert pathlib.Path(made).parent == tmp_path and pathlib.Path(made).name.startswith(
        f"{processes.STORE_PREFIX}{os.getpid()}-")
