"""The benchmark CLI and its reports, on the CPU: arguments, outputs, --compare on stored JSON."""

import functools
import gzip
import json
import pathlib

import pytest

from cublas_det.results.check import GemmCheck, Kind, ScenarioResult
from cublas_det.cli import bench, gemms
from cublas_det.cli import capture as capture_cli
from cublas_det.core.config import GemmConfig
from cublas_det.render import markdown, text
from cublas_det.check.stored import bench_result
from cublas_det.store import run as run_file
from cublas_det.results.bench import BenchResult, ShapeReport, run_failed
from cublas_det.results.timing import Arm

from .conftest import bench_json


STORED = pathlib.Path(__file__).parent / "data" / "h200_run.json"  # a default run on an H200
CAPTURE_LOGS = STORED.parent / "capture"


@pytest.fixture
def run(typed):
    return lambda *args: typed("python -m cublas_det.bench", *args)


def test_help_shows_defaults_and_examples():
    text = bench.build_parser().format_help()
    for fragment in ("--preset NAME", "(default: trunk mamba2-130m)", "(default: 16384)", "--compare BASE.json",
                     "--fail-on PCT", "examples:", "--quick", "--plot PATH", "--verbose"):
        assert fragment in text
    assert bench.EXIT_CODES in text and "--processes" not in text  # timing runs in this process


@pytest.mark.parametrize("args, message", [
    (["--shape", "12x3"], "bad shape '12x3'"),
    (["--shape", "0x5x5"], "must be positive"),
    (["--scenarios", "again"], "unknown scenario 'again'"),
    (["--json", "/nonexistent-dir/x.json"], "directory /nonexistent-dir does not exist"),
    (["--markdown", "/"], "is a directory"),
    (["--compare", "/nonexistent.json"], "/nonexistent.json: no such file"),
    (["--tokens", "0"], "tokens"),
])
def test_argument_errors_are_one_line_exit_2(run, args, message):
    result = run(*args)
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0 and message in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def test_argparse_usage_errors_exit_2(run):
    result = run("--fail-on", "5")
    assert result.returncode == 2 and "--fail-on needs --compare" in result.stderr
    assert run("--modes", "fast").returncode == 2
    gone = run("--processes", "2")
    assert gone.returncode == 2 and "unrecognized arguments: --processes 2" in gone.stderr


def test_list_needs_no_gpu(run):
    result = run("--list", "--preset", "mamba2-2.7b", "--tokens", "2048")
    assert result.returncode == 0
    assert "mamba2-2.7b/in_proj/dW" in result.stdout and "10576" in result.stdout and " 2048 " in result.stdout


def test_list_with_capture_lists_the_captured_gemms_not_the_catalogue(run, tmp_path):
    logs = []
    for kind in ("cublas", "cublaslt"):
        logs.append(tmp_path / f"block.{kind}.log")
        logs[-1].write_bytes(gzip.decompress((CAPTURE_LOGS / f"block.{kind}.log.gz").read_bytes()))
    capture = tmp_path / "c.json"
    assert capture_cli.main(["--from", *map(str, logs), "--out", str(capture)]) == 0
    result = run("--capture", capture, "--list")
    assert result.returncode == 0, result.stderr
    assert "6 captured GEMMs in DEFAULT/algo99/ws32M/bfloat16->bfloat16:" in result.stdout
    assert "g3 mamba2-130m/out_proj/dW" in result.stdout and "trunk/" not in result.stdout


def test_compare_cli_rejects_a_file_that_is_not_ours(run, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{\"x\": 1}")
    result = run("--compare", str(bad))
    assert result.returncode == 2 and "not a cublas_det --json file" in result.stderr
    bad.write_text("not json")
    assert "not JSON" in run("--compare", str(bad)).stderr


def test_stored_json_has_pytest_benchmark_layout():
    data = json.loads(STORED.read_text())
    assert {"machine_info", "benchmarks", "datetime", "version"} <= set(data)
    bench0 = data["benchmarks"][0]
    assert {"group", "name", "params", "stats", "extra_info"} <= set(bench0)
    assert {"min", "max", "mean", "median", "iqr", "rounds", "data"} <= set(bench0["stats"])
    assert len(bench0["extra_info"]["digest"]) == 64
    assert data["machine_info"]["gpu"]["sm_count"] == 132


def test_report_stats_and_verdict_on_synthetic_samples():
    stats = run_file.stats([10.0, 12.0, 11.0, 13.0, 9.0])
    # pytest-benchmark's quartiles (odd count: q1 = 0.25*9 + 0.75*10, q3 = 0.75*12 + 0.25*13)
    assert stats["median"] == pytest.approx(11e-6) and stats["rounds"] == 5 and stats["iqr"] == pytest.approx(2.5e-6)


G, H, C = Kind.GUARANTEE, Kind.HAZARD, Kind.COMPARISON


def _bench_result(checks, timing=None, shape="64x64x65536:nn"):
    from cublas_det.core.shapes import parse_shape

    return BenchResult((ShapeReport(parse_shape(shape), checks, timing),), {"gpu": {"name": "NVIDIA H200",
                       "sm_count": 132}, "env": {"CUPY_TF32": "1"}}, "2026-11-29T00:00:00+00:00", 1.0, "0.1.0")


def _checks(*results_per_mode, shape="64x64x65536:nn"):
    from cublas_det.core.shapes import parse_shape

    return {mode: GemmCheck(parse_shape(shape), GemmConfig.parse(mode), "argument", 0, "ab" * 32, error, results)
            for mode, error, results in results_per_mode}


def test_the_headline_gives_each_hazard_its_cheapest_cure_or_the_command_that_measures_it():
    """Reproducible, and at what cost: a hazard's cure the run checked (a handle per stream) is priced from the
    run; the others name the command that verifies and times them, all before the first table."""
    rendered = text.render_text(bench_result(run_file.load_run(str(STORED))), width=100)
    head = rendered.split("\n\n")[1]  # the answers, after the title and its note
    assert " ".join(head.split()).count("Cheapest cures: shared handle: a handle and workspace per stream "
                                        "(verified here for 4 of 4 pairs), no time cost (the same GEMM); batch "
                                        "size, SM count: not measured in this run; measured by `cublas-det "
                                        "prescribe`") == 1


def test_a_cure_the_run_ran_and_timed_is_priced_from_the_run():
    from cublas_det.timing import ArmTiming, Ratio, ShapeTiming

    def results(changed):
        return (ScenarioResult("repeat", G, 20, 0), ScenarioResult("sm-count", H, 4, 2 if changed else 0))

    checks = _checks(("PEDANTIC", 5e-7, results(True)), ("PEDANTIC/lt-nosplitk", 5e-7, results(False)),
                     ("TF32", 3e-4, results(False)))
    arms = tuple(ArmTiming(Arm.read(n), (t,) * 10, (t,) * 10) for n, t in
                 (("PEDANTIC", 10.0), ("PEDANTIC/lt-nosplitk", 15.0), ("TF32", 5.0)))
    ratios = (Ratio("PEDANTIC/lt-nosplitk", "PEDANTIC", 1.5, 1.4, 1.6, 10), Ratio("TF32", "PEDANTIC", 0.5, 0.4, 0.6, 10))
    timed = _bench_result(checks, ShapeTiming("64x64x65536:nn", 2 * 64 * 64 * 65536, 56, 6, 10, arms, ratios, 1.0))
    # TF32 kept its bits under the SM count too, but it is another mode, not a cure of PEDANTIC
    assert ("Cheapest cures: SM count: PEDANTIC/lt-nosplitk (verified here for 1 of 1 pair), 1.50x the time"
            in text.summary_lines(timed))
    untimed = text.summary_lines(_bench_result(checks))
    assert ("Cheapest cures: SM count: not measured in this run; measured by `cublas-det prescribe --shape "
            "64x64x65536:nn --modes pedantic`") in untimed


def test_text_and_markdown_reports_from_results(tmp_path):
    from cublas_det.timing import ArmTiming, Ratio, ShapeTiming

    def results(changed):
        return (ScenarioResult("repeat", G, 20, 0),
                ScenarioResult("streams-shared-handle", H, 64, 26 if changed else 0, 10, 4096, 1e-5, 3, (1, 2), 1.0,
                               1.00001),
                ScenarioResult("batch-invariance", H, 0, 0, not_applicable="the batch (T) is K, the reduction axis"),
                ScenarioResult("modes", C, 2, 1, extra={"groups": [["PEDANTIC", "DEFAULT"], ["TF32"]]}))

    checks = _checks(("PEDANTIC", 5e-7, results(True)), ("DEFAULT", 5e-7, results(True)), ("TF32", 3e-4, results(False)))
    arms = tuple(ArmTiming(Arm.read(n), (t,) * 10, (t * 1.2,) * 10) for n, t in
                 (("PEDANTIC", 29.3), ("DEFAULT", 29.3), ("TF32", 17.7), ("DEFAULT-AA", 29.3)))
    ratios = (Ratio("TF32", "PEDANTIC", 0.606, 0.604, 0.608, 10), Ratio("PEDANTIC", "DEFAULT", 1.0, 0.996, 1.001, 10),
              Ratio("DEFAULT-AA", "DEFAULT", 1.002, 1.0, 1.004, 10))
    timing = ShapeTiming("64x64x65536:nn", 2 * 64 * 64 * 65536, 56, 6, 10, arms, ratios, 1.0)
    result = _bench_result(checks, timing)
    rendered = text.render_text(result)
    rows = {line.split()[0]: line for line in rendered.splitlines() if line.startswith("  ") and line.split()[0] in checks}
    # A hazard that changed bits is a finding in its own column, never "not reproducible".
    assert rows["PEDANTIC"].split()[1:4] == ["yes", "shared", "handle"] and "DEFAULT" in rows["PEDANTIC"]
    assert rows["TF32"].split()[1:3] == ["yes", "none"]
    assert "no:" not in rendered.lower() and "not reproducible" not in rendered
    assert "changed by" in rendered and "same bits as" in rendered and "1 (reference)" not in rendered
    lines = text.summary_lines(result)
    assert lines == [
        "Reproducible: yes, all 3 shape/mode pairs gave the same bits in every guarantee checked (repeat)",
        ("Hazards (bits changed, as cuBLAS warns; findings, never failures): shared handle in 2 of 3 pairs, "
         "batch size not applicable (3 pairs)"),
        ("Cheapest cures: shared handle: not measured in this run; measured by `cublas-det prescribe --shape "
         "64x64x65536:nn --modes pedantic default`"),
        "Same bits as PEDANTIC: DEFAULT on 1 of 1 shape, TF32 on 0 of 1 shape",
        "Time, PEDANTIC vs DEFAULT: no measurable cost on 1 of 1 shape (within ±0.4%)",
        "Time, TF32 vs PEDANTIC: 1.65x faster (custom shapes)",
        "Verdict: pass, every guarantee held (exit 0)"]
    assert rendered.splitlines()[2:4] == [lines[0], lines[1][:lines[1].index(" batch")]]  # the answer comes first
    verbose = text.render_text(result, verbose=True)
    assert "  timed: 56 GEMMs/batch, 6 buffer sets, 10 rounds, A/A 1.002" in verbose and "A/A" not in rendered
    assert "CUPY_TF32=1 is set" in rendered
    md = markdown.to_markdown(result)
    assert md.startswith("# cublas_det 0.1.0 on NVIDIA H200") and "| mode | repro | changed by |" in md
    data = bench_json(result)
    assert [b["name"] for b in data["benchmarks"]][:3] == ["64x64x65536:nn[PEDANTIC]", "64x64x65536:nn[DEFAULT]",
                                                           "64x64x65536:nn[TF32]"]
    first = data["benchmarks"][0]
    assert first["stats"]["median"] == pytest.approx(29.3e-6)
    assert first["extra_info"]["reproducible"] == "yes" and first["extra_info"]["findings"] == ["streams-shared-handle"]
    assert first["extra_info"]["same_bits_as"] == ["DEFAULT"] and first["extra_info"]["config"]["name"] == "PEDANTIC"
    assert not run_failed(result)  # hazards and modes never fail the run


def test_a_guarantee_that_differs_fails_with_its_details():
    broken = ScenarioResult("workspace-config", G, 20, 20, 4_300_000, 12_582_912, 1e-4, 9, (5, 7), 1.0, 1.0001,
                            detail="CUBLAS_WORKSPACE_CONFIG=:4096:8: 5 rounds x 4 streams on one handle; the "
                                   "worker's first output differs from this process's bits")
    checks = _checks(("DEFAULT", 5e-7, (ScenarioResult("repeat", G, 20, 0), broken)), shape="16384x768x3352:nn")
    result = _bench_result(checks, shape="16384x768x3352:nn")
    assert ("Reproducible: NO for 1 of 1 shape/mode pair (guarantees checked: repeat, workspace config)"
            in text.summary_lines(result))
    assert "Verdict: FAIL (exit 1): 1 pair gave other bits under a guarantee; details below" in text.summary_lines(
        result)
    lines = text.detail_lines(result)
    assert any(line.startswith("FAILED") and "16384x768x3352:nn DEFAULT: workspace-config" in line for line in lines)
    assert ("  16384x768x3352:nn DEFAULT: workspace-config: 20/20 runs differ, up to 4300000 elements, 9 ULP at "
            "(5, 7) (CUBLAS_WORKSPACE_CONFIG=:4096:8: 5 rounds x 4 streams on one handle; the worker's first "
            "output differs from this process's bits)") in lines
    rendered = text.render_text(result, width=100)
    row = next(line for line in rendered.splitlines() if line.startswith("  DEFAULT "))
    assert row.split()[1:3] == ["NO:", "workspace-config"], row  # the cell names the guarantee, as documented
    assert "FAILED (documented as reproducible" in rendered and run_failed(result)
    assert max(map(len, rendered.splitlines())) <= 100
    twice = _checks(("DEFAULT", 5e-7, (ScenarioResult("repeat", G, 20, 3), broken)), shape="16384x768x3352:nn")
    row = next(line for line in text.render_text(_bench_result(twice, shape="16384x768x3352:nn")).splitlines()
               if line.startswith("  DEFAULT "))
    assert row.split()[1:4] == ["NO:", "repeat", "+1"], row


def test_the_summary_never_claims_what_did_not_run():
    nothing = _bench_result({})
    lines = text.summary_lines(nothing)
    assert lines == ["Reproducible: not checked (no scenario ran)", "Verdict: pass, nothing failed (exit 0)"]
    erred = _checks(("PEDANTIC", float("nan"), (ScenarioResult("repeat", G, 0, 0, error="OutOfMemoryError: oom"),
                                                ScenarioResult("sm-count", H, 0, 0, error="OutOfMemoryError: oom"))))
    result = _bench_result(erred)
    lines = text.summary_lines(result)
    assert not any("same bits" in line or "yes" in line for line in lines)
    assert lines[0] == "Reproducible: error for 1 of 1 shape/mode pair"
    assert "Verdict: FAIL (exit 1): 1 could not be checked or timed; details below" in lines
    assert any(line.startswith("Could not run (2 scenario runs)") for line in text.detail_lines(result))
    only_hazards = _checks(("PEDANTIC", 5e-7, (ScenarioResult("sm-count", H, 2, 0),)))
    lines = text.summary_lines(_bench_result(only_hazards))
    assert lines[0] == "Reproducible: not checked (no guarantee scenario ran for the 1 shape/mode pair)"
    assert "Hazards (bits changed, as cuBLAS warns; findings, never failures): SM count in 0 of 1 pair" in lines
    assert lines[-1] == "Verdict: pass, no guarantee was checked (exit 0)"  # never "every guarantee held"


def test_a_scenario_that_compared_nothing_never_reads_identical():
    # The pending placeholder of a worker scenario that never came back, and modes with one configuration
    pending = ScenarioResult("fresh-process", G, 0, 0, detail="pending")
    alone = ScenarioResult("modes", C, 0, 0, extra={"groups": [["PEDANTIC"]], "same_bits_as": []})
    hazard = ScenarioResult("sm-count", H, 0, 0)
    for result in (pending, alone, hazard):
        assert not result.identical and not result.changed_bits and "identical" not in str(result)
        assert str(result) == f"{result.scenario}: nothing compared" + (" (pending)" if result.detail else "")
        data = result.to_dict()
        assert data["identical"] is False and data["outcome"] == "nothing compared"
        assert ScenarioResult.from_dict(data) == result
    checks = _checks(("PEDANTIC", 5e-7, (pending, hazard, alone)))
    assert checks["PEDANTIC"].verdict.value == "not checked"
    result = _bench_result(checks)
    lines = text.summary_lines(result)
    assert lines[0] == "Reproducible: not checked (no guarantee scenario ran for the 1 shape/mode pair)"
    assert lines[-1] == "Verdict: pass, no guarantee was checked (exit 0)" and not any("Hazards" in l for l in lines)
    row = next(line for line in text.render_text(result).splitlines() if line.startswith("  PEDANTIC "))
    assert row.split()[1:5] == ["not", "checked", "-", "-"], row  # repro, changed by, same bits as
    extra = bench_json(result)["benchmarks"][0]["extra_info"]
    assert extra["reproducible"] == "not checked" and all(not s["identical"] for s in extra["scenarios"])


def test_comparison_is_printed_and_its_exit_code_returned(capsys):
    import argparse

    from cublas_det.store.run import run_from_dict

    data = json.loads(STORED.read_text())
    args = argparse.Namespace(compare="base.json", fail_on=5.0)
    baseline = run_from_dict(data, "base.json")
    assert gemms.print_comparison(args, None, data) == 0 and capsys.readouterr().out == ""
    assert gemms.print_comparison(args, baseline, data) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("Compared with base.json\n  compared 45: 45 identical") and "identical bits" in printed
    assert "\n  base.json: NVIDIA H200" in printed  # the answer first, then the files
    far = "/runs/" + "a-long-directory-name/" * 3 + "base.json"
    assert bench.print_comparison(argparse.Namespace(compare=far, fail_on=5.0), run_from_dict(data, far), data) == 0
    printed = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in printed) <= 100 and any(line.startswith(f"  {far}: ") for line in printed)
    drifted = json.loads(json.dumps(data))
    drifted["benchmarks"][0]["extra_info"]["digest"] = "0" * 64
    assert gemms.print_comparison(args, baseline, drifted) == 1 and "bits DIFFER" in capsys.readouterr().out
    exit_code = functools.partial(gemms.exit_code, "cublas-det bench")
    assert exit_code(False, False, 2) == 2 and exit_code(True, False, 0) == 1
    assert exit_code(False, False, 0, written=False) == 2 and exit_code(True, True, 2) == 130
    assert capsys.readouterr().err == "cublas-det bench: error: interrupted: the results above are those that completed\n"
    assert exit_code(True, False, 0, written=False) == 1  # a late output failure keeps the finding


def test_a_hazard_that_could_not_run_is_reported_but_fails_nothing():
    hazard_erred = _checks(("PEDANTIC", 5e-7, (ScenarioResult("repeat", G, 20, 0),
                                               ScenarioResult("sm-count", H, 0, 0, error="CublasError: boom"))))
    result = _bench_result(hazard_erred)
    assert text.summary_lines(result)[0].startswith("Reproducible: yes, 1 shape/mode pair gave")
    assert any(line.startswith("Could not run (1 scenario run)") and "sm-count" in line
               for line in text.detail_lines(result))
    assert not run_failed(result) and text.summary_lines(result)[-1].startswith("Verdict: pass")
    guarantee_erred = _checks(("PEDANTIC", 5e-7, (ScenarioResult("repeat", G, 0, 0, error="CublasError: boom"),)))
    assert run_failed(_bench_result(guarantee_erred))
