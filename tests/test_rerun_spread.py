"""bench/rerun_spread.py: how often another run's ratio lies inside a run's interval, and the spread beyond."""

import copy
import json
import os
import pathlib
import subprocess
import sys

import pytest

from .conftest import load_bench_script

DATA = pathlib.Path(__file__).parent / "data"


def test_rerun_spread_counts_another_runs_median_inside_each_interval(tmp_path):
    rerun_spread = load_bench_script("rerun_spread.py")
    assert rerun_spread.FAULTLESS_INSIDE == pytest.approx(0.834, abs=1e-3)  # P(|Z| < 1.96 / sqrt(2))
    stored = json.loads((DATA / "h200_run_identity.json").read_text())
    moved = copy.deepcopy(stored)
    for ratio in moved["cublas_det"]["ratios"]["trunk/W_in/dW"]:
        if ratio["numerator"] == "TF32":  # another run, 2% slower TF32 there, the interval as wide
            ratio.update(median=ratio["median"] * 1.02, ci_low=ratio["ci_low"] * 1.02, ci_high=ratio["ci_high"] * 1.02)
    paths = []
    for name, data in (("a.json", stored), ("b.json", stored), ("c.json", moved)):
        (tmp_path / name).write_text(json.dumps(data))
        paths.append(str(tmp_path / name))
    lines = rerun_spread.report(paths)
    line = next(x for x in lines if x.startswith("trunk/W_in/dW:"))
    # a and b hold each other; c's median lies outside theirs and theirs outside c's: 2 of 6 pairs.
    assert "inside 2/6" in line and "beyond 0.00%" not in line
    assert all("inside 6/6" in x and "between 0.00%, beyond 0.00%" in x for x in lines[:-1] if x is not line)
    assert lines[-1].startswith("3 runs, 15 shapes, TF32/PEDANTIC: another run's median inside an interval in 86 of 90")
    root = DATA.parent.parent
    result = subprocess.run([sys.executable, str(root / "bench" / "rerun_spread.py"), paths[0]], capture_output=True,
                            text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(root)})
    assert result.returncode == 2 and result.stderr.strip().endswith("give two or more --json files of python -m "
                                                                      "cublas_det.bench")
