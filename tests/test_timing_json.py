"""--json is a real pytest-benchmark file: its stats are pytest-benchmark's, computed its way; its
layout holds every key of a file pytest-benchmark itself wrote; ``pytest-benchmark compare`` reads
it, untimed entries (--no-timing, a device sweep) included; and cublas_det reads it back."""

import json
import pathlib
import random
import subprocess
import sys
import warnings

import pytest

from cublas_det.store import run as run_file
from cublas_det.store.results import commit_info
from cublas_det.results.bench import BenchResult, ShapeReport
from cublas_det.store.run import run_from_dict
from cublas_det.core.shapes import parse_shape
from cublas_det.timing import ArmTiming, Ratio, ShapeTiming
from cublas_det.results.timing import Arm

from .conftest import bench_json

pytest_benchmark = pytest.importorskip("pytest_benchmark", reason="needs the test extra's pytest-benchmark")


def _pb_stats(data, iterations):
    from pytest_benchmark.stats import Stats

    stats = Stats()
    for x in data:
        stats.update(x)
    return {**stats.as_dict(), "data": list(data), "iterations": iterations}


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 13, 14, 15, 60])
def test_stats_are_pytest_benchmarks_own(n):
    rng = random.Random(n)
    samples_us = [5.0 + rng.expovariate(2.0) for _ in range(n)]  # skewed, with outliers
    ours = run_file.stats(samples_us, iterations=237)
    theirs = _pb_stats([x * 1e-6 for x in samples_us], 237)
    assert set(ours) == set(theirs)
    for key, value in theirs.items():
        if key == "hd15iqr":  # pytest-benchmark < 5.3.1 returned the first datum above the fence (a bug it fixed)
            continue
        assert ours[key] == (pytest.approx(value, rel=1e-12) if isinstance(value, float) else value), key
    # Tukey's definition, as pytest-benchmark 5.3.1 and later compute it: the highest datum within Q3 + 1.5 IQR.
    data = sorted(x * 1e-6 for x in samples_us)
    fence = ours["q3"] + 1.5 * ours["iqr"]
    assert ours["hd15iqr"] == max(x for x in data if x <= fence * (1 + 1e-12))


def _result():
    """A run of two shapes: one timed (with its A/A arm), one only checked (no timing)."""
    timed = parse_shape("128x56x4096:nt")
    arms = tuple(ArmTiming(Arm.read(n), tuple(t * (1 + 0.01 * (i % 3)) for i in range(12)), (2 * t,) * 12,
                           (1980.0,) * 12)
                 for n, t in (("PEDANTIC", 9.0), ("TF32", 7.0), ("PEDANTIC-AA", 9.0)))
    ratios = (Ratio("TF32", "PEDANTIC", 0.778, 0.776, 0.780, 12), Ratio("PEDANTIC-AA", "PEDANTIC", 1.0, 0.998, 1.002, 12))
    timing = ShapeTiming(timed.name, timed.flop, 110, 60, 12, arms, ratios, 0.4, "interval", options={
        "min_rounds": 10, "max_rounds": 60, "budget_s": 2.5})
    return BenchResult((ShapeReport(timed, {}, timing), ShapeReport(parse_shape("64x64x64:nn"), {}, None, "not timed")),
                       {"gpu": {"name": "NVIDIA H200", "sm_count": 132}, "env": {}}, "2026-11-29T00:00:00+00:00", 1.0,
                       "0.1.0")


def test_entries_carry_gemms_per_sample_the_interval_and_the_stop():
    data = bench_json(_result())
    first = data["benchmarks"][0]
    assert first["name"] == "128x56x4096:nt[PEDANTIC]" and first["stats"]["iterations"] == 110
    assert first["stats"]["rounds"] == 12 and first["options"]["timer"] == run_file.TIMER
    info = first["extra_info"]
    low, high = info["median_ci_s"]
    assert low <= first["stats"]["median"] <= high and info["stop_reason"] == "interval"
    assert info["timing_trusted"] is True and info["noise_floor"] == pytest.approx(0.002)
    assert info["sm_clock_mhz"] == 1980.0
    assert [b["name"] for b in data["benchmarks"]][-1] == "128x56x4096:nt[PEDANTIC-AA]"
    assert data["cublas_det"]["timing"]["128x56x4096:nt"]["stop_reason"] == "interval"
    assert data["commit_info"] == commit_info() and set(data["commit_info"]) >= {"id", "dirty", "branch", "project"}


def test_layout_holds_every_key_of_a_file_pytest_benchmark_wrote(pytester):
    pytester.makepyfile(test_tiny="""
        def test_tiny(benchmark):
            benchmark.pedantic(sum, args=([1, 2, 3],), rounds=5, iterations=3)
    """)
    out = pytester.path / "theirs.json"
    assert pytester.runpytest(f"--benchmark-json={out}", "-p", "no:cacheprovider").ret == 0
    theirs = json.loads(out.read_text())
    ours = bench_json(_result())
    assert set(theirs) <= set(ours)
    assert set(theirs["commit_info"]) <= set(ours["commit_info"])
    their_entry = theirs["benchmarks"][0]
    for entry in ours["benchmarks"]:  # the timed ones and the untimed one alike
        assert set(their_entry) <= set(entry), entry["name"]
        assert set(their_entry["stats"]) == set(entry["stats"]), entry["name"]
        assert {type(v) for v in their_entry["stats"].values()} >= {type(v) for k, v in entry["stats"].items()
                                                                  if k != "rounds" or v}


def _compare(tmp_path, monkeypatch, capsys, *args) -> subprocess.CompletedProcess:
    """``pytest-benchmark compare ARGS`` in ``tmp_path``, run in this process (its CLI's main)."""
    from pytest_benchmark.cli import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["pytest-benchmark", "compare", *map(str, args)])
    capsys.readouterr()
    with warnings.catch_warnings(record=True) as warned:  # its "Failed to load" is a warning
        warnings.simplefilter("always")
        try:
            main()
            code = 0
        except SystemExit as stop:
            code = stop.code or 0
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(sys.argv, code, out, err + "".join(f"{w.message}\n" for w in warned))


def test_pytest_benchmark_compare_reads_the_file(tmp_path, monkeypatch, capsys):
    path = tmp_path / "run.json"
    path.write_text(json.dumps(bench_json(_result()), indent=1))
    result = _compare(tmp_path, monkeypatch, capsys, path, "--group-by=group")
    assert result.returncode == 0, result.stderr
    assert "Failed to load" not in result.stdout + result.stderr
    assert "128x56x4096:nt[TF32]" in result.stdout and "64x64x64:nn[PEDANTIC]" not in result.stdout  # no check ran
    row = next(line for line in result.stdout.splitlines() if "[TF32]" in line)
    assert "Iterations" in result.stdout and row.split()[-2:] == ["12", "110"]  # rounds, GEMMs per sample


@pytest.mark.parametrize("name", ["h200_run.json", "h200_run_identity.json"])
def test_pytest_benchmark_compare_reads_the_shipped_runs_and_cublas_det_reads_them_without_the_newer_fields(
        tmp_path, monkeypatch, capsys, name):
    """``pytest-benchmark compare tests/data/h200_run.json`` (the README's run) failed: KeyError 'outliers'."""
    path = pathlib.Path(__file__).parent / "data" / name
    result = _compare(tmp_path, monkeypatch, capsys, path)
    assert result.returncode == 0 and "Failed to load" not in result.stdout + result.stderr, result.stderr
    assert "trunk/W_in/forward[PEDANTIC]" in result.stdout
    from pytest_benchmark.stats import Stats

    data = json.loads(path.read_text())
    for entry in data["benchmarks"]:  # a file of 0.1.0 lacked these: still read
        assert set(Stats.fields) <= set(entry["stats"])
        for field in ("iqr_outliers", "stddev_outliers", "outliers", "ld15iqr", "hd15iqr"):
            del entry["stats"][field]
    assert len(run_from_dict(data, name).entries) == len(data["benchmarks"])


def test_untimed_entries_are_complete_and_read_back_as_untimed(tmp_path, monkeypatch, capsys):
    shape = parse_shape("64x64x64:nn")
    entry = run_file.benchmark_entry(shape, "PEDANTIC", None, {"shape": shape.to_dict(), "digest": "ab" * 32})
    assert entry["stats"]["rounds"] == 0 and entry["stats"]["data"] == [] and set(entry["stats"]) == set(
        run_file.STATS_FIELDS)
    data = bench_json(_result())
    data["benchmarks"].append(entry)
    path = tmp_path / "run.json"
    path.write_text(json.dumps(data))
    result = _compare(tmp_path, monkeypatch, capsys, path)
    assert result.returncode == 0 and "Failed to load" not in result.stdout + result.stderr
    assert "64x64x64:nn[PEDANTIC]" in result.stdout
    run = run_from_dict(json.loads(path.read_text()), "run.json")
    assert run.entries[-1].stats is None and run.entries[0].stats["iterations"] == 110


def test_a_timing_in_visits_reads_back_with_each_samples_visit_the_same_intervals_and_the_phases():
    from cublas_det.check.stored import bench_result

    shape = parse_shape("128x56x4096:nt")
    setups = tuple(i // 2 for i in range(12))  # 6 visits
    arms = tuple(ArmTiming(Arm.read(n), tuple(t * (1 + 0.01 * (i % 4) + 0.004 * setups[i]) for i in range(12)),
                           (2 * t,) * 6, (1980.0,) * 12, setups=setups)
                 for n, t in (("PEDANTIC", 9.0), ("TF32", 7.0), ("PEDANTIC-AA", 9.0)))
    ratios = (Ratio("TF32", "PEDANTIC", 0.778, 0.770, 0.786, 12, 0.009, 5),)
    timing = ShapeTiming(shape.name, shape.flop, 110, 60, 12, arms, ratios, 0.4, "interval",
                         options={"visits": 6, "setups": 6})
    result = BenchResult((ShapeReport(shape, {}, timing),), {"gpu": {"name": "NVIDIA H200"}, "env": {}},
                         "2026-11-30T00:00:00+00:00", 1.0, "0.1.0", phases={"startup": 0.51234, "timing": 3.2})
    data = json.loads(json.dumps(bench_json(result)))
    assert data["benchmarks"][0]["extra_info"]["setups"] == list(setups)
    assert data["cublas_det"]["phases_s"] == {"startup": 0.512, "timing": 3.2}
    back = bench_result(run_from_dict(data, "run.json")).shapes[0].timing
    assert back.arm("TF32").setups == setups and back.arm("TF32").eager_us == (14.0,) * 6
    assert back.arm("TF32").median_ci_us == pytest.approx(arms[1].median_ci_us)  # the visits' interval again
    assert arms[1].median_ci_us != ArmTiming(Arm.read("TF32"), arms[1].graph_us, arms[1].eager_us).median_ci_us
    assert back.ratios[0].setup_dof == 5 and back.options["visits"] == 6
