"""bench/rerun_spread.py: how often another run's ratio lies inside a run's interval, against what the runs'
own errors would give, and the spread beyond them."""

import copy
import dataclasses
import json
import math
import pathlib

import pytest

from cublas_det.timing import Ratio

from .conftest import load_bench_script

DATA = pathlib.Path(__file__).parent / "data"
ROOT = DATA.parent.parent


@pytest.fixture
def rerun_spread():
    return load_bench_script("rerun_spread.py")


def _write(tmp_path, name, data):
    (tmp_path / name).write_text(json.dumps(data))
    return str(tmp_path / name)


def test_inside_counts_against_the_runs_own_errors(tmp_path, rerun_spread):
    stored = json.loads((DATA / "h200_run_identity.json").read_text())
    moved = copy.deepcopy(stored)
    for ratio in moved["cublas_det"]["ratios"]["trunk/W_in/dW"]:
        if ratio["numerator"] == "TF32":  # another run, 2% slower TF32 there, the interval as wide
            ratio.update(median=ratio["median"] * 1.02, ci_low=ratio["ci_low"] * 1.02,
                         ci_high=ratio["ci_high"] * 1.02)
    paths = [_write(tmp_path, name, data)
             for name, data in (("a.json", stored), ("b.json", stored), ("c.json", moved))]
    lines = rerun_spread.report(paths)
    line = next(x for x in lines if x.startswith("trunk/W_in/dW:"))
    # a and b hold each other; c's median lies outside theirs and theirs outside c's: 2 of 6 pairs,
    # where the runs' own errors (their intervals / 1.96 here: a file without setup terms) would give
    # 83% of 6: intervals of 1.96 standard errors hold another run's median with P(|Z| < 1.96 / sqrt(2)).
    assert "inside 2/6 (expected 5.0)" in line
    between = float(line.split("between ")[1].split("%")[0])
    beyond = float(line.split("beyond ")[1].split("%")[0])
    assert 1.0 < beyond <= between < 1.2  # medians m, m, 1.02 m: sd 1.15%, nearly all of it beyond the errors
    others = [x for x in lines[:-2] if x is not line]
    assert len(others) == 14 and all("inside 6/6 (expected 5.0)" in x and "between 0.00%, beyond 0.00%" in x
                                     for x in others)
    assert lines[-2].startswith("3 runs, 15 shapes, TF32/PEDANTIC: another run's median inside an interval in 86 of "
                                "90 ordered pairs (96%), where runs that differed only by their own errors would give "
                                "75 (83%)")
    assert lines[-1].startswith("GPU: no UUID in these files")  # v0.1's reference runs predate it


def test_a_runs_standard_error_comes_from_the_terms_of_its_interval(rerun_spread):
    ratio = Ratio("TF32", "PEDANTIC", 0.8, 0.8 * (1 - 0.006), 0.8 * (1 + 0.006), 48, setup_half_width=0.005)
    assert rerun_spread.standard_error(ratio, 4) == pytest.approx(0.005 / 3.182)  # t(3) for 4 setups
    assert rerun_spread.standard_error(ratio, 1) == pytest.approx(0.006 / 1.96)
    over_processes = dataclasses.replace(ratio, setup_dof=2)  # 12 visits, but 3 processes decided the term
    assert rerun_spread.standard_error(over_processes, 12) == pytest.approx(0.005 / 4.303)
    figures = rerun_spread.spread([(ratio, 4), (ratio, 4)])
    expected = math.erf(0.006 / math.sqrt(2 * 2 * (0.005 / 3.182) ** 2))
    assert figures["inside"] == 2 and figures["expected"] == pytest.approx(2 * expected)


@pytest.mark.parametrize("make, message", [
    (lambda stored: {"benchmarks": [{"group": "g", "extra_info": {"gemms_per_sample": 100, "mode": "TF32"}}]},
     ("a file of python -m pytest bench/, not a --json run of python -m cublas_det.bench; set it against a bench "
      "run with bench/suite_vs_bench.py")),
    (lambda stored: {**stored, "cublas_det": {**stored["cublas_det"], "ratios": {}}},
     "no TF32/PEDANTIC ratio (a --no-timing run, or other modes)"),
])
def test_files_it_cannot_use_are_one_line_each(typed, tmp_path, make, message):
    stored = json.loads((DATA / "h200_run_identity.json").read_text())
    paths = [_write(tmp_path, "a.json", stored), _write(tmp_path, "other.json", make(stored))]
    result = typed("bench/rerun_spread.py", *paths)
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1
    assert result.stderr.strip().endswith(message) and "other.json" in result.stderr
    alone = typed("bench/rerun_spread.py", paths[0])
    assert alone.returncode == 2 and alone.stderr.strip().endswith("give two or more --json files of python -m "
                                                                   "cublas_det.bench")


def test_a_shape_missing_from_a_file_is_named_not_dropped_silently(tmp_path, rerun_spread):
    stored = json.loads((DATA / "h200_run_identity.json").read_text())
    fewer = copy.deepcopy(stored)
    del fewer["cublas_det"]["ratios"]["trunk/W_a/dX"]
    lines = rerun_spread.report([_write(tmp_path, "a.json", stored), _write(tmp_path, "b.json", fewer)])
    assert lines[-1] == "not in every file, left out: trunk/W_a/dX"
    assert lines[-3].startswith("2 runs, 14 shapes")


def test_it_says_whether_the_runs_share_a_gpu(tmp_path, rerun_spread):
    stored = json.loads((DATA / "h200_run_identity.json").read_text())
    a, b, c = (copy.deepcopy(stored) for _ in range(3))
    for data, uuid in ((a, "GPU-aaaa"), (b, "GPU-aaaa"), (c, "GPU-cccc")):
        data["machine_info"]["gpu"]["uuid"] = uuid
    paths = [_write(tmp_path, name, data) for name, data in (("a.json", a), ("b.json", b), ("c.json", c))]
    assert rerun_spread.report(paths[:2])[-1] == "GPU: every run with a UUID on GPU-aaaa"
    assert rerun_spread.report(paths)[-1] == ("GPU: 2 different GPUs (GPU-aaaa, GPU-cccc): the spread between runs is "
                                              "partly theirs")
    old = _write(tmp_path, "old.json", stored)
    assert rerun_spread.report([paths[0], old])[-1] == "GPU: every run with a UUID on GPU-aaaa; 1 file without one"
