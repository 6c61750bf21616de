"""The benchmark CLI and its reports, on the CPU: arguments, outputs, --compare on stored JSON."""

import copy
import json
import os
import pathlib
import subprocess
import sys

import pytest

from cublas_det import _report, bench

from .conftest import needs_no_gpu

STORED = pathlib.Path(__file__).parent / "data" / "h200_run.json"  # a default run on an H200


def _run(*args):
    return subprocess.run([sys.executable, "-m", "cublas_det.bench", *args], capture_output=True, text=True, timeout=120)


def test_help_shows_defaults_and_examples():
    text = bench.build_parser().format_help()
    for fragment in ("--preset NAME", "(default: trunk mamba2-130m)", "(default: 16384)", "--compare BASE.json",
                     "--fail-on PCT", "examples:", "--quick", "--plot PATH"):
        assert fragment in text


@pytest.mark.parametrize("args, message", [
    (["--shape", "12x3"], "bad shape '12x3'"),
    (["--shape", "0x5x5"], "must be positive"),
    (["--scenarios", "again"], "unknown scenario 'again'"),
    (["--json", "/nonexistent-dir/x.json"], "directory /nonexistent-dir does not exist"),
    (["--markdown", "/"], "is a directory"),
    (["--compare", "/nonexistent.json"], "No such file"),
    (["--tokens", "0"], "tokens"),
])
def test_argument_errors_are_one_line_exit_2(args, message):
    result = _run(*args)
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0 and message in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def test_argparse_usage_errors_exit_2():
    result = _run("--fail-on", "5")
    assert result.returncode == 2 and "--fail-on needs --compare" in result.stderr
    assert _run("--modes", "fast").returncode == 2


def test_list_needs_no_gpu():
    result = _run("--list", "--preset", "mamba2-2.7b", "--tokens", "2048")
    assert result.returncode == 0
    assert "mamba2-2.7b/in_proj/dW" in result.stdout and "10576" in result.stdout and " 2048 " in result.stdout


@needs_no_gpu
def test_no_gpu_is_one_line_exit_2(tmp_path):
    result = _run("--json", str(tmp_path / "out.json"))
    assert result.returncode == 2
    prog = f"{os.path.basename(sys.executable)} -m cublas_det.bench"  # the name the user typed
    assert result.stderr.strip().startswith(f"{prog}: error: no GPU available:")
    assert result.stdout == "" and not (tmp_path / "out.json").exists()


def test_compare_stored_run_with_itself_is_identical():
    data = json.loads(STORED.read_text())
    lines, failed = _report.compare(data, data, fail_on_pct=5)
    assert not failed
    assert any(line.endswith("identical bits, time +0.0%") for line in lines)
    assert not any("DIFFER" in line or "REGRESSION" in line for line in lines)


def test_compare_flags_drifted_bits_and_regressions():
    base = json.loads(STORED.read_text())
    current = copy.deepcopy(base)
    first = current["benchmarks"][0]
    first["extra_info"]["digest"] = "0" * 64
    second = current["benchmarks"][1]
    second["stats"]["median"] *= 1.2
    lines, failed = _report.compare(base, current, fail_on_pct=10)
    assert failed
    assert f"{first['name']}: bits DIFFER" in "\n".join(lines)
    assert any(line.startswith(second["name"]) and "REGRESSION (> 10%)" in line for line in lines)
    _, failed = _report.compare(base, current, fail_on_pct=None)
    assert failed  # drifted bits fail even without --fail-on


def test_compare_cli_rejects_a_file_that_is_not_ours(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{\"x\": 1}")
    result = _run("--compare", str(bad))
    assert result.returncode == 2 and "not a cublas_det --json file" in result.stderr
    bad.write_text("not json")
    assert "not JSON" in _run("--compare", str(bad)).stderr


def test_stored_json_has_pytest_benchmark_layout():
    data = json.loads(STORED.read_text())
    assert {"machine_info", "benchmarks", "datetime", "version"} <= set(data)
    bench0 = data["benchmarks"][0]
    assert {"group", "name", "params", "stats", "extra_info"} <= set(bench0)
    assert {"min", "max", "mean", "median", "iqr", "rounds", "data"} <= set(bench0["stats"])
    assert len(bench0["extra_info"]["digest"]) == 64
    assert data["machine_info"]["gpu"]["sm_count"] == 132


def test_report_stats_and_verdict_on_synthetic_samples():
    stats = _report._stats([10.0, 12.0, 11.0, 13.0, 9.0])
    assert stats["median"] == pytest.approx(11e-6) and stats["rounds"] == 5 and stats["iqr"] == pytest.approx(2e-6)
    assert _report.peak_tflops("NVIDIA H200", "TF32") == 495.0 and _report.peak_tflops("NVIDIA H200", "PEDANTIC") == 67.0
    assert _report.peak_tflops("Some GPU", "TF32") is None


def test_text_and_markdown_reports_from_results(tmp_path):
    from cublas_det._check import GemmCheck, ScenarioResult
    from cublas_det._timing import ArmTiming, Ratio, ShapeTiming
    from cublas_det.shapes import parse_shape

    shape = parse_shape("64x64x65536:nn")
    checks = {m: GemmCheck(shape, v, "argument", 0, "ab" * 32, e, (
        ScenarioResult("repeat", 20, 0), ScenarioResult("streams-shared-handle", 64, 26 if m != "TF32" else 0, 10, 4096,
                                                        1e-5, 3, (1, 2), 1.0, 1.00001)))
              for m, v, e in (("PEDANTIC", 2, 5e-7), ("DEFAULT", 0, 5e-7), ("TF32", 3, 3e-4))}
    arms = tuple(ArmTiming(n, (t,) * 10, (t * 1.2,) * 10) for n, t in
                 (("PEDANTIC", 29.3), ("DEFAULT", 29.3), ("TF32", 17.7), ("DEFAULT-AA", 29.3)))
    ratios = (Ratio("TF32", "PEDANTIC", 0.606, 0.604, 0.608, 10), Ratio("PEDANTIC", "DEFAULT", 1.0, 0.996, 1.001, 10),
              Ratio("DEFAULT-AA", "DEFAULT", 1.002, 1.0, 1.004, 10))
    timing = ShapeTiming(shape.name, shape.flop, 56, 6, 10, arms, ratios, 1.0)
    result = _report.BenchResult((_report.ShapeReport(shape, checks, timing),), {"gpu": {"name": "NVIDIA H200",
                                 "sm_count": 132}, "env": {"CUPY_TF32": "1"}}, "2026-11-29T00:00:00+00:00", 1.0, "0.1.0")
    text = _report.render_text(result)
    assert "PEDANTIC  no: streams-shared-handle" in text
    assert "TF32 is 1.65x faster than PEDANTIC [1.64, 1.66]" in text
    assert "PEDANTIC costs +0.0% ± 0.2% over DEFAULT" in text and "A/A 1.002" in text
    assert "bits change under streams-shared-handle: 2 shape/mode pairs" in text
    assert "CUPY_TF32=1 is set" in text
    markdown = _report.to_markdown(result)
    assert markdown.startswith("# cublas_det benchmark") and "| mode | reproducible |" in markdown
    data = _report.to_json(result)
    assert [b["name"] for b in data["benchmarks"]][:3] == ["64x64x65536:nn[PEDANTIC]", "64x64x65536:nn[DEFAULT]",
                                                           "64x64x65536:nn[TF32]"]
    assert data["benchmarks"][0]["stats"]["median"] == pytest.approx(29.3e-6)
    assert not any(_report.check_failures(c) for c in checks.values())  # the hazard scenario is a finding only


def test_a_documented_scenario_that_differs_fails_with_its_details():
    from cublas_det._check import GemmCheck, ScenarioResult
    from cublas_det.shapes import parse_shape

    shape = parse_shape("16384x768x3352:nn")
    broken = ScenarioResult("workspace-config", 20, 20, 4_300_000, 12_582_912, 1e-4, 9, (5, 7), 1.0, 1.0001,
                            detail="CUBLAS_WORKSPACE_CONFIG=:4096:8: 5 rounds x 4 streams on one handle; the "
                                   "worker's first output differs from this process's bits")
    checks = {"DEFAULT": GemmCheck(shape, 0, "argument", 0, "ab" * 32, 5e-7, (ScenarioResult("repeat", 20, 0), broken))}
    result = _report.BenchResult((_report.ShapeReport(shape, checks),), {"gpu": {"name": "NVIDIA H200"}},
                                 "2026-11-29T00:00:00+00:00", 1.0, "0.1.0")
    lines = _report.summary_lines(result)
    assert any(line.startswith("FAILED") and "16384x768x3352:nn DEFAULT: workspace-config" in line for line in lines)
    assert ("  16384x768x3352:nn DEFAULT: workspace-config: 20/20 runs differ, up to 4300000 elements, 9 ULP at "
            "(5, 7) (CUBLAS_WORKSPACE_CONFIG=:4096:8: 5 rounds x 4 streams on one handle; the worker's first "
            "output differs from this process's bits)") in lines


def test_comparison_is_printed_and_its_verdict_returned(capsys):
    import argparse

    from cublas_det import bench

    data = json.loads(STORED.read_text())
    args = argparse.Namespace(compare="base.json", fail_on=5.0)
    assert bench._print_comparison(args, None, data) is False and capsys.readouterr().out == ""
    assert bench._print_comparison(args, data, data) is False
    printed = capsys.readouterr().out
    assert printed.startswith("Compared with base.json\n  against NVIDIA H200") and "identical bits" in printed
    drifted = json.loads(json.dumps(data))
    drifted["benchmarks"][0]["extra_info"]["digest"] = "0" * 64
    assert bench._print_comparison(args, data, drifted) is True and "bits DIFFER" in capsys.readouterr().out
