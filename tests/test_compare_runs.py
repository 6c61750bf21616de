"""Comparing stored runs offline: identity before bits, pairs and fleets, and re-rendering a run."""

import copy
import hashlib
import json
import pathlib

import pytest

from cublas_det.render.compare import compare_fleet, compare_runs
from cublas_det.store.run import run_from_dict
from cublas_det.core.shapes import preset

from .conftest import bench_json

DATA = pathlib.Path(__file__).parent / "data"
STORED = DATA / "h200_run_identity.json"  # a default run on an H200, with identities (NumPy 2.5.2)
LEGACY = DATA / "h200_run.json"  # a default run on an H200 by cublas_det 0.1: no identities


def _with_identity(data, seed=0, numpy="2.5.2"):
    """A copy whose entries claim another seed or NumPy (and so other input digests)."""
    data = copy.deepcopy(data)
    for entry in data["benchmarks"]:
        identity = entry["extra_info"]["identity"]
        identity.update(seed=seed, numpy=numpy)
        if identity["inputs"]:
            identity["inputs"] = {side: hashlib.sha256(f"{side}{digest}{seed}{numpy}".encode()).hexdigest()
                                  for side, digest in identity["inputs"].items()}
    return data


@pytest.fixture
def stored():
    return json.loads(STORED.read_text())


def _write(tmp_path, name, data):
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return str(path)


@pytest.fixture
def cli(typed):
    return lambda *args: typed("python -m cublas_det.compare", *args)


def test_a_run_against_itself_is_identical_exit_0(cli, tmp_path, stored):
    path = _write(tmp_path, "run.json", stored)
    result = cli(path, path)
    assert result.returncode == 0, result.stderr
    assert "compared 45: 45 identical, 0 differ; time: 45 SAME; 0 with other inputs, 0 without a digest" in result.stdout
    assert "DIFFER" not in result.stdout and "-AA]" not in result.stdout  # the A/A controls are no results
    assert "SAME: within ±1%" in result.stdout  # the legend of the time verdicts and their thresholds
    assert max(map(len, result.stdout.splitlines()[-4:])) <= 100  # the closing line and the legend


def test_another_seed_is_inputs_differ_exit_2_never_bits_differ(stored):
    other = _with_identity(stored, seed=1)
    for entry in other["benchmarks"]:
        if entry["extra_info"].get("digest"):
            entry["extra_info"]["digest"] = "f" * 64  # other inputs, other bits: must not read as a drift
    comparison = compare_runs(run_from_dict(stored, "base.json"), run_from_dict(other, "new.json"))
    assert comparison.exit_code == 2 and not any("bits DIFFER" in line for line in comparison.lines)
    assert any(line.endswith("inputs differ, not comparable: seed 0 vs 1; the input digests differ")
               for line in comparison.lines)
    assert comparison.lines[0].startswith("nothing comparable")  # the answer first


def test_another_numpy_with_the_same_seed_is_named(stored):
    other = _with_identity(stored, numpy="1.26.4")
    comparison = compare_runs(run_from_dict(stored, "base.json"), run_from_dict(other, "new.json"))
    assert comparison.exit_code == 2
    assert any("(NumPy 2.5.2 vs 1.26.4: NumPy promises its seeded stream only on one build)" in line
               for line in comparison.lines)


def test_another_t_is_inputs_differ_exit_2(stored):
    """A --tokens 2048 run against a 16384 baseline: the same roles, another GEMM."""
    other = copy.deepcopy(stored)
    small = {s.name: s for s in preset("mamba2-130m", 2048)}
    for entry in other["benchmarks"]:
        shape = small.get(entry["group"])
        if shape:
            entry["extra_info"]["shape"] = shape.to_dict()
            entry["extra_info"]["identity"].update(m=shape.m, n=shape.n, k=shape.k, tokens=2048)
            entry["stats"] = entry["stats"] and {**entry["stats"], "median": entry["stats"]["median"] / 8}
    comparison = compare_runs(run_from_dict(stored, "base.json"), run_from_dict(other, "new.json"), fail_on_pct=5)
    text = "\n".join(comparison.lines)
    assert ("mamba2-130m/in_proj/dW[PEDANTIC] (3352x768x2048:nt): inputs differ, not comparable: another GEMM: "
            "3352x768x16384:nt vs 3352x768x2048:nt, T 16384 vs 2048") in text
    assert "bits DIFFER" not in text and "time -87.5%" not in text
    assert comparison.exit_code == 0  # the trunk (fixed T) still compares: identical
    trunk_free = {**other, "benchmarks": [e for e in other["benchmarks"] if e["group"] in small]}
    assert compare_runs(run_from_dict(stored, "base.json"), run_from_dict(trunk_free, "new.json")).exit_code == 2


def test_a_batch_of_the_same_matrices_is_another_gemm(stored):
    other = copy.deepcopy(stored)
    for entry in other["benchmarks"]:
        entry["extra_info"]["shape"]["batch"] = 8
        entry["extra_info"]["identity"]["batch"] = 8
    comparison = compare_runs(run_from_dict(stored, "base.json"), run_from_dict(other, "new.json"))
    text = "\n".join(comparison.lines)
    assert "another GEMM: 4096x128x56:tn vs 4096x128x56:tn:b8" in text and "bits DIFFER" not in text
    assert comparison.exit_code == 2


def test_one_changed_digest_is_bits_differ_exit_1(cli, tmp_path, stored):
    doctored = copy.deepcopy(stored)
    doctored["benchmarks"][8]["extra_info"]["digest"] = "0" * 64
    result = cli(_write(tmp_path, "a.json", stored), _write(tmp_path, "b.json", doctored))
    assert result.returncode == 1
    name = doctored["benchmarks"][8]["name"]
    assert f"{name} (128x56x4096:nt): bits DIFFER" in result.stdout
    assert "compared 45: 44 identical, 1 differ" in result.stdout


def test_a_time_regression_fails_only_with_fail_on_and_only_when_slower_beyond_the_intervals(stored):
    slower = copy.deepcopy(stored)
    stats = slower["benchmarks"][1]["stats"]
    stats["data"] = [x * 1.2 for x in stats["data"]]
    stats["median"] *= 1.2
    base, new = run_from_dict(stored, "a.json"), run_from_dict(slower, "b.json")
    assert compare_runs(base, new).exit_code == 0
    comparison = compare_runs(base, new, fail_on_pct=10)
    assert comparison.exit_code == 1
    assert any("time SLOWER +20.0%" in line and line.endswith("REGRESSION") for line in comparison.lines)
    assert "  REGRESSION: SLOWER by more than 10% (--fail-on)" in comparison.lines
    assert any(line.startswith("compared 45: 45 identical, 0 differ; time: 44 SAME, 1 SLOWER") for line in comparison.lines)
    assert any("time SAME +0.0%" in line for line in comparison.lines)  # the untouched entries
    noisy = copy.deepcopy(stored)  # the same median, but samples spread wide: not a verdict to fail on
    stats = noisy["benchmarks"][1]["stats"]
    stats["data"] = [x * (0.5 + i % 3 * 0.5) for i, x in enumerate(stats["data"])]
    stats["median"] *= 1.2
    comparison = compare_runs(base, run_from_dict(noisy, "c.json"), fail_on_pct=10)
    assert comparison.exit_code == 0 and any("time UNSURE" in line for line in comparison.lines)


def test_a_time_verdict_on_timing_a_run_did_not_trust_says_so(stored):
    untrusted = copy.deepcopy(stored)
    entry = untrusted["benchmarks"][1]
    entry["extra_info"]["untrusted_reason"] = "the A/A control lies outside 1 +- 0.5%"
    comparison = compare_runs(run_from_dict(stored, "a.json"), run_from_dict(untrusted, "b.json"))
    name = f"{entry['group']}[{entry['params']['mode']}]"
    line = next(line for line in comparison.lines if line.startswith(name))
    assert line.endswith("(timing not trusted in this run: the A/A control lies outside 1 +- 0.5%)"), line
    assert comparison.answer[-1].endswith("time: 45 SAME (1 on timing a run did not trust); 0 with other inputs, "
                                          "0 without a digest"), comparison.answer
    trusted = compare_runs(run_from_dict(stored, "a.json"), run_from_dict(stored, "b.json"))
    assert not any("not trust" in line for line in trusted.lines)


def test_a_file_of_version_0_1_is_read_with_a_note(stored):
    legacy = json.loads(LEGACY.read_text())
    comparison = compare_runs(run_from_dict(legacy, "old.json"), run_from_dict(stored, "new.json"))
    assert comparison.exit_code == 0  # the bits of 0.1 and of this version agree on the H200
    assert any(line.startswith("compared 45: 45 identical, 0 differ; time: ") for line in comparison.lines)
    assert comparison.details[2].startswith("note: old.json was written by cublas_det 0.1.0, which recorded no seed")


def test_a_fleet_of_three_groups_the_odd_file_with_its_machine(cli, tmp_path, stored):
    odd = copy.deepcopy(stored)
    odd["machine_info"]["gpu"]["sm_count"] = 114
    odd["machine_info"]["gpu"]["name"] = "NVIDIA H100"
    for entry in odd["benchmarks"]:
        if entry["group"] == "trunk/W_a/dW" and entry["extra_info"].get("digest"):
            entry["extra_info"]["digest"] = "c" * 64
    paths = [_write(tmp_path, f"node-{i}.json", data) for i, data in enumerate((stored, stored, odd))]
    result = cli(*paths)
    assert result.returncode == 1, result.stderr
    text = " ".join(result.stdout.split())  # lines wrapped to 100 columns, read as one
    assert ("trunk/W_a/dW[PEDANTIC] (128x128x4096:nt): 2 groups: [node-0.json, node-1.json] "
            in text)
    assert "| [node-2.json] cccccccccccc on NVIDIA H100, 114 SMs, driver 13.0, cuBLAS 13.1.0" in text
    assert "trunk/W_in/dW[PEDANTIC] (128x56x4096:nt): all 3 agree" in text
    assert result.stdout.startswith("compared 45 GEMM/configuration pairs present in two or more files: 42 agree, "
                                    "3 differ\n")


def test_a_sweep_file_compares_its_devices_in_a_fleet(stored):

    sweep = {"machine_info": {"gpu": {"name": "NVIDIA H200"}, "devices": [
        {"device_id": 0, "provenance": {"gpu": {"name": "NVIDIA H200", "sm_count": 132}}},
        {"device_id": 1, "provenance": {"gpu": {"name": "NVIDIA H200", "sm_count": 132}}}]},
        "cublas_det": {"sweep": True}, "benchmarks": [
        {"name": "x[PEDANTIC]", "group": "x", "params": {"mode": "PEDANTIC"}, "stats": None, "extra_info": {
            "shape": {"m": 8, "n": 8, "k": 8, "cublas_op": "NN"}, "device_digests": {"0": "aa", "1": "bb"}}}]}
    runs = [run_from_dict(sweep, f"{name}.json") for name in ("a", "b", "c")]
    comparison = compare_fleet(runs)
    assert comparison.exit_code == 1
    assert any("[a.json:device 0, b.json:device 0, c.json:device 0] aa" in line for line in comparison.lines)


def test_report_re_renders_a_stored_run(typed, tmp_path):
    markdown = tmp_path / "run.md"
    result = typed("python -m cublas_det.report", STORED, "--markdown", markdown)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("cublas_det 0.1.0 on NVIDIA H200 (132 SMs), cuBLAS 13.1.0, driver 13.0")
    lines = result.stdout.splitlines()
    assert lines[2].startswith("Reproducible: yes, all 45 shape/mode pairs")  # the answer first
    assert max(len(line) for line in lines) <= 100  # every line fits 100 columns
    assert any(line.startswith("Verdict: pass") for line in lines[:24])  # on the first screen
    assert "  PEDANTIC  yes    batch size               DEFAULT" in result.stdout
    assert "Same bits as PEDANTIC: DEFAULT on 15 of 15 shapes, TF32 on 0 of 15 shapes" in result.stdout
    assert markdown.read_text().startswith("# cublas_det 0.1.0 on NVIDIA H200")


def _renamed(data, group, new_name):
    """A copy in which the shape ``group`` is a custom shape, named by its spec (as ``--shape MxNxK:op`` names it)."""
    data = copy.deepcopy(data)
    for entry in data["benchmarks"]:
        if entry["group"] == group:
            entry["group"] = new_name
            entry["name"] = entry["name"].replace(group, new_name)
            entry["extra_info"]["shape"]["name"] = new_name
            entry["extra_info"]["identity"]["preset"] = None
    return data


def test_a_custom_shape_is_paired_with_the_preset_role_of_the_same_gemm(stored):
    custom = _renamed(stored, "trunk/W_in/dW", "128x56x4096:nt")
    comparison = compare_runs(run_from_dict(stored, "a.json"), run_from_dict(custom, "b.json"))
    assert comparison.exit_code == 0
    assert "128x56x4096:nt[PEDANTIC]: identical bits, time SAME +0.0% [-0.3%, +0.3%]" in \
        comparison.lines
    assert not any("only in" in line for line in comparison.lines)
    assert any(line.startswith("compared 45: 45 identical, 0 differ; time: ") for line in comparison.lines)


def test_a_fleet_pairs_a_custom_shape_with_the_preset_role_of_the_same_gemm(stored):
    custom = _renamed(stored, "trunk/W_in/dW", "128x56x4096:nt")
    for entry in custom["benchmarks"]:
        if entry["group"] == "128x56x4096:nt" and entry["extra_info"].get("digest"):
            entry["extra_info"]["digest"] = "c" * 64
    runs = [run_from_dict(data, name) for data, name in ((stored, "a.json"), (stored, "b.json"), (custom, "c.json"))]
    comparison = compare_fleet(runs)
    assert comparison.exit_code == 1
    line = next(x for x in comparison.lines if x.startswith("trunk/W_in/dW[PEDANTIC] (128x56x4096:nt)"))
    assert "2 groups: [a.json, b.json]" in line and "| [c.json as 128x56x4096:nt] cccccccccccc" in line
    assert "compared 45 GEMM/configuration pairs present in two or more files: 42 agree, 3 differ" in comparison.lines
    # Two files that name the GEMM by its spec: the preset's role, in one file alone, joins them.
    runs = [run_from_dict(data, name) for data, name in ((stored, "a.json"), (custom, "c.json"), (custom, "d.json"))]
    line = next(x for x in compare_fleet(runs).lines if x.startswith("128x56x4096:nt[PEDANTIC]: "))
    assert "2 groups: [c.json, d.json] cccccccccccc" in line and "| [a.json as trunk/W_in/dW]" in line
    # Two files of each naming, in any order: one comparison of all four, which differs.
    for names in (("a", "b", "c", "d"), ("c", "a", "d", "b")):
        runs = [run_from_dict(stored if name in "ab" else custom, f"{name}.json") for name in names]
        comparison = compare_fleet(runs)
        assert comparison.exit_code == 1
        line = next(x for x in comparison.lines if "[PEDANTIC] (128x56x4096:nt)" in x)
        # Named by the preset's role in either order (the tie in files goes to it), the custom files moved.
        assert line.startswith("trunk/W_in/dW[PEDANTIC] (128x56x4096:nt): 2 groups: ")
        assert "[a.json, b.json]" in line and "[c.json as 128x56x4096:nt, d.json as 128x56x4096:nt] cccccccccccc" in line
        assert not any("all 2 agree" in x for x in comparison.lines if "128x56x4096:nt" in x)


# -- small fleets: which results a fleet compares --------------------------------------------------
def _result(spec, digest=None, seed=0, devices=None):
    """One stored result of GEMM ``spec`` (``MxNxK``) in PEDANTIC, with a digest or one per device."""
    m, n, k = (int(x) for x in spec.split("x"))
    inputs = {side: hashlib.sha256(f"{side}{spec}{seed}".encode()).hexdigest() for side in "ab"}
    info = {"shape": {"name": spec, "m": m, "n": n, "k": k, "cublas_op": "NN"},
            "identity": {"seed": seed, "inputs": inputs, "numpy": "2.5.2"}}
    info.update({"device_digests": devices} if devices else {"digest": digest})
    return {"name": f"{spec}[PEDANTIC]", "group": spec, "params": {"mode": "PEDANTIC"}, "stats": None,
            "extra_info": info}


def _small_run(name, *results, devices=0):
    machine = {"gpu": {"name": "NVIDIA H200", "sm_count": 132}}
    data = {"machine_info": dict(machine), "benchmarks": list(results)}
    if devices:
        data["cublas_det"] = {"sweep": True}
        data["machine_info"]["devices"] = [{"device_id": d, "provenance": machine} for d in range(devices)]
    return run_from_dict(data, name)


def test_a_fleet_compares_the_files_of_the_same_inputs_among_themselves():
    """a.json has other inputs (seed 0) than b.json and c.json (seed 1), which differ: a finding, exit 1."""
    runs = [_small_run("a.json", _result("8x8x8", "aa")), _small_run("b.json", _result("8x8x8", "bb", seed=1)),
            _small_run("c.json", _result("8x8x8", "cc", seed=1))]
    comparison = compare_fleet(runs)
    assert comparison.exit_code == 1, comparison.lines
    assert "8x8x8[PEDANTIC] (8x8x8:nn): inputs differ in a.json: not comparable with b.json (seed 1 vs 0; the input "\
           "digests differ)" in \
        comparison.lines
    line = next(x for x in comparison.lines if x.startswith("8x8x8[PEDANTIC] (8x8x8:nn) [inputs of b.json]: "))
    assert "2 groups: [b.json] bb" in line and "| [c.json] cc" in line
    # b.json and c.json agreeing: a.json was compared with nothing, said in the answer (exit 2), never agreeing
    runs[2] = _small_run("c.json", _result("8x8x8", "bb", seed=1))
    comparison = compare_fleet(runs)
    assert comparison.exit_code == 2
    assert comparison.answer[1].startswith("compared with nothing: a.json (no result with the same GEMM")
    assert comparison.answer[1].endswith("not counted as agreeing")
    assert "8x8x8[PEDANTIC] (8x8x8:nn) [inputs of b.json]: all 2 agree (bb)" in comparison.lines


def test_a_fleet_with_nothing_in_common_exits_2_naming_each_result_and_its_file():
    """Each result in one file only: nothing was compared across files, even where a sweep file's own devices agree."""
    runs = [_small_run("s0.json", _result("8x8x8", devices={"0": "aa", "1": "aa"}), devices=2),
            _small_run("s1.json", _result("16x16x16", devices={"0": "bb", "1": "bb"}), devices=2),
            _small_run("p.json", _result("32x32x32", "cc"))]
    comparison = compare_fleet(runs)
    assert comparison.exit_code == 2, comparison.lines
    assert "8x8x8[PEDANTIC] (8x8x8:nn): only in s0.json" in comparison.lines
    assert "32x32x32[PEDANTIC] (32x32x32:nn): only in p.json" in comparison.lines
    assert comparison.lines[1] == ("compared 0 GEMM/configuration pairs present in two or more files: 0 agree, "
                                    "0 differ; 3 only in one file")
    # seeds differing in every file: named as such, and nothing compared
    runs = [_small_run(f"{i}.json", _result("8x8x8", "aa", seed=i)) for i in range(3)]
    comparison = compare_fleet(runs)
    assert comparison.exit_code == 2
    assert ("8x8x8[PEDANTIC] (8x8x8:nn): inputs differ in every file: not comparable (seed 0 vs 1; the input digests "
            "differ)") in comparison.lines


def test_two_sweep_files_whose_devices_disagree_alike():
    """Device 1 differs from device 0 in both files the same way: a finding (exit 1), said as such."""
    devices = {"0": "a" * 64, "1": "b" * 64}
    runs = [_small_run(name, _result("8x8x8", devices=devices), devices=2) for name in ("n0.json", "n1.json")]
    comparison = compare_runs(*runs)
    assert comparison.exit_code == 1
    assert ("8x8x8[PEDANTIC] (8x8x8:nn): bits DIFFER (the devices of each file disagree, alike in both: "
            "device 0 aaaaaaaaaaaa, device 1 bbbbbbbbbbbb)") in comparison.lines
    comparison = compare_fleet([*runs, runs[0]])
    assert comparison.exit_code == 1
    line = next(x for x in comparison.lines if x.startswith("8x8x8[PEDANTIC] (8x8x8:nn): "))
    assert "2 groups: [n0.json:device 0, n1.json:device 0, n0.json:device 0] aaaaaaaaaaaa" in line
    assert "| [n0.json:device 1, n1.json:device 1, n0.json:device 1] bbbbbbbbbbbb" in line


@pytest.mark.parametrize("order", [(0, 1), (1, 0)])
def test_two_entries_of_one_gemm_in_a_file_are_an_error_naming_both(cli, tmp_path, order):
    """Which of two entries came first decided the verdict (0 or 1); now the file is refused, in either order."""
    results = [_result("8x8x8", "aa"), _result("8x8x8", "bb")]
    data = {"machine_info": {}, "benchmarks": [results[i] for i in order]}
    good = _write(tmp_path, "good.json", {"machine_info": {}, "benchmarks": [_result("8x8x8", "aa")]})
    result = cli(good, _write(tmp_path, "dup.json", data))
    assert result.returncode == 2, result.stdout
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert ("dup.json: benchmarks[0] '8x8x8[PEDANTIC]' and benchmarks[1] '8x8x8[PEDANTIC]' are both 8x8x8 in "
            "PEDANTIC: a run holds one entry per shape and configuration") in result.stderr


def test_nan_timing_samples_are_refused_even_where_fail_on_would_pass_them(cli, tmp_path, stored):
    """NaN samples read as 'time SAME +0.0% [+nan%, +nan%]' and passed --fail-on 1; now the field is named."""
    broken = copy.deepcopy(stored)
    timed = next(entry for entry in broken["benchmarks"] if entry["stats"]["data"])
    timed["stats"]["data"][0] = float("nan")
    result = cli(_write(tmp_path, "base.json", stored), _write(tmp_path, "nan.json", broken), "--fail-on", "1")
    assert result.returncode == 2, result.stdout
    at = broken["benchmarks"].index(timed)
    assert (f"nan.json: benchmarks[{at}].stats.data[0]: expected a positive number of seconds, found nan"
            in result.stderr)


# -- what --json writes for a failed check, read back -------------------------------------------------
def _stored_check(check):
    """``check`` written by the --json writer and read back by the report's reader."""
    from cublas_det.results.bench import BenchResult, ShapeReport
    from cublas_det.check.stored import bench_result

    result = BenchResult((ShapeReport(check.shape, {check.mode_name: check}),), {"numpy_version": "2.5.2"},
                         "2026-12-01T00:00:00+00:00", 1.0, "0.1.0", seed=check.seed)
    data = json.loads(json.dumps(bench_json(result)))
    return data["benchmarks"][0], bench_result(run_from_dict(data, "run.json")).shapes[0].checks[check.mode_name]


def test_json_of_a_failed_check_says_no_and_keeps_its_input_digests():
    from cublas_det.results.check import GemmCheck, Kind, Reproducible, ScenarioResult
    from cublas_det.core.config import GemmConfig
    from cublas_det.core.shapes import GemmShape

    shape = GemmShape("x", 64, 64, 65536, trans_a=True)
    inputs = {"a": "1" * 64, "b": "2" * 64}
    repeat = ScenarioResult("repeat", Kind.GUARANTEE, 20, 3, 17, 4096, 2e-6, 4, (3, 7), 1.0, 1.0000001)
    check = GemmCheck(shape, GemmConfig.parse("pedantic"), "argument", 5, "d" * 64, 3e-7, (repeat,),
                      input_digests=inputs)
    entry, back = _stored_check(check)
    info = entry["extra_info"]
    assert info["reproducible"] == "NO" and info["failures"] == ["repeat"] and info["findings"] == []
    assert info["identity"]["inputs"] == inputs and info["identity"]["seed"] == 5
    assert info["identity"]["numpy"] == "2.5.2" and info["digest"] == "d" * 64
    assert back.verdict is Reproducible.NO and back.input_digests == inputs
    assert back.guarantee_failures[0].index == (3, 7) and back.guarantee_failures[0].differing_runs == 3


def test_a_reference_gemm_that_failed_with_only_hazards_asked_reads_error_when_read_back():
    """The stored check lost its error: with no guarantee scenario it read 'not checked'."""
    from cublas_det.results.check import GemmCheck, Reproducible
    from cublas_det.check.scenarios import REGISTRY
    from cublas_det.core.config import GemmConfig
    from cublas_det.render.text import reproducible_cell
    from cublas_det.results.check import check_failures
    from cublas_det.core.shapes import GemmShape

    error = "out of memory allocating 12.0 GiB"
    check = GemmCheck(GemmShape("x", 8, 8, 8), GemmConfig.parse("tf32"), "argument", 0, "", float("nan"),
                      (REGISTRY["batch-invariance"].failed(f"no output to check: {error}"),), error=error)
    assert check.verdict is Reproducible.ERROR
    entry, back = _stored_check(check)
    assert entry["extra_info"]["reproducible"] == "error" and entry["extra_info"]["error"] == error
    assert back.verdict is Reproducible.ERROR and back.error == error
    assert check_failures(back) == ["reference"] and reproducible_cell(back) == "error: no output"


def _failed_repeat(data, group="trunk/W_a/dX"):
    """A copy in which the repeat scenario of ``group`` gave other bits in every configuration."""
    data = copy.deepcopy(data)
    for entry in data["benchmarks"]:
        for scenario in entry["extra_info"].get("scenarios") or ():
            if entry["group"] == group and scenario["scenario"] == "repeat":
                scenario.update(differing_runs=3, mismatched_elements=7, max_ulp=2, identical=False, outcome=None)
    return data


def test_report_exits_with_the_stored_verdicts_code(typed, tmp_path, stored):
    failed = typed("python -m cublas_det.report", _write(tmp_path, "failed.json", _failed_repeat(stored)))
    assert "Verdict: FAIL (exit 1)" in failed.stdout
    assert failed.returncode == 1, failed.stderr
    passed = typed("python -m cublas_det.report", STORED)
    assert "Verdict: pass" in passed.stdout and passed.returncode == 0
    assert "1 it failed (a guarantee failed or could not" in typed("python -m cublas_det.report", "--help").stdout


def test_report_of_a_0_1_file_says_what_it_cannot_tell_and_counts_only_what_it_can(typed, tmp_path):
    markdown = tmp_path / "old.md"
    result = typed("python -m cublas_det.report", LEGACY, "--markdown", markdown)
    lines = result.stdout.splitlines()
    note = " ".join(line.strip() for line in lines[1:8])
    assert note.startswith(f"note: {LEGACY} was written by cublas_det 0.1.0, which cannot tell: the inputs it ran on")
    # 0.1's workspace-config compared with a worker's first output that could read operands still in flight
    assert "workspace config in mamba2-130m/in_proj/dX[DEFAULT] (a difference from the worker's own first" in note
    assert "batch size in 15 dW results (run there, though their batch is the reduction axis" in note
    assert "FAIL" not in result.stdout and result.returncode == 0, result.stderr
    assert "Verdict: pass, every guarantee held (exit 0)" in lines
    text = " ".join(result.stdout.split())
    assert "batch size in 30 of 30 pairs (not applicable to 15)" in text
    assert "workspace config compared nothing in 1" in text
    assert "Time, TF32 vs PEDANTIC: 1.21-1.68x faster (trunk); 3.73-7.46x faster (mamba2-130m)" in lines
    assert "custom shapes" not in result.stdout
    assert "note: " in markdown.read_text()
    assert "note:" not in typed("python -m cublas_det.report", STORED).stdout  # a file of this version: none


def test_a_workspace_config_difference_placed_by_its_reference_digest_still_fails(typed, tmp_path, stored):
    data = copy.deepcopy(stored)
    entry = next(e for e in data["benchmarks"] if e["name"] == "trunk/W_a/dX[DEFAULT]")
    scenario = next(s for s in entry["extra_info"]["scenarios"] if s["scenario"] == "workspace-config")
    assert "reference_digest" in scenario["extra"]
    scenario.update(differing_runs=20, mismatched_elements=5, max_ulp=3, identical=False, outcome=None)
    result = typed("python -m cublas_det.report", _write(tmp_path, "run.json", data))
    assert result.returncode == 1 and "Reproducible: NO for 1" in result.stdout and "note:" not in result.stdout


def test_a_fleet_member_of_another_seed_is_named_as_compared_with_nothing(cli, tmp_path, stored):
    paths = [_write(tmp_path, f"node-{i}.json", data) for i, data in enumerate((stored, stored, _with_identity(stored, 1)))]
    result = cli(*paths)
    assert result.returncode == 2, result.stdout
    answer = " ".join(result.stdout.split("\n\n")[0].split())
    assert answer.startswith("compared 45 GEMM/configuration pairs present in two or more files: 45 agree, 0 differ "
                             "compared with nothing: node-2.json (no result with the same GEMM")
    assert cli(*paths[:2]).returncode == 0


def test_fail_on_says_how_many_regressed_and_which(cli, tmp_path, stored):
    slower = copy.deepcopy(stored)
    for index in (1, 4):
        stats = slower["benchmarks"][index]["stats"]
        stats["data"] = [x * 1.2 for x in stats["data"]]
        stats["median"] *= 1.2
    names = [slower["benchmarks"][i]["name"] for i in (1, 4)]
    result = cli(_write(tmp_path, "a.json", stored), _write(tmp_path, "b.json", slower), "--fail-on", "10")
    assert result.returncode == 1
    answer = " ".join(result.stdout.split("\n\n")[0].split())
    assert (f"time REGRESSION: 2 results slower by more than 10% (--fail-on): {names[0]} (4096x128x56:tn) +20.0%, "
            f"{names[1]} (4096x56x128:nn) +20.0%") in answer


def test_a_pattern_that_matched_no_file_is_said(cli, tmp_path):
    result = cli(str(tmp_path / "node-*.json"))
    assert result.returncode == 2
    assert result.stderr.strip().endswith(f"{tmp_path}/node-*.json: no file matches the pattern; check the path")


def test_both_forms_name_results_alike_and_every_line_fits(cli, tmp_path, stored):
    odd = copy.deepcopy(stored)
    odd["benchmarks"][8]["extra_info"]["digest"] = "0" * 64
    paths = [_write(tmp_path, f"{name}.json", data) for name, data in (("a", stored), ("b", odd), ("c", stored))]
    two, fleet = cli(*paths[:2]), cli(*paths)
    name = "trunk/W_in/dW[PEDANTIC] (128x56x4096:nt): "
    assert f"\n{name}bits DIFFER" in two.stdout and f"\n{name}2 groups: " in fleet.stdout
    for result in (two, fleet):
        assert max(map(len, result.stdout.splitlines())) <= 100


def test_every_line_of_report_and_compare_on_the_shipped_runs_fits_100_columns(typed, monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    runs = sorted(DATA.glob("h200_run*.json"))
    assert len(runs) == 2
    outputs = [typed("python -m cublas_det.report", run) for run in runs]
    outputs += [typed("python -m cublas_det.compare", *pair, "--fail-on", "1") for pair in (runs, runs[::-1])]
    outputs.append(typed("python -m cublas_det.compare", *runs, runs[0]))
    for result in outputs:
        assert result.stdout and result.returncode in (0, 1), result.stderr
        # a path longer than a line is never split (so it can be copied): it stands alone on its line
        wide = [line for line in (result.stdout + result.stderr).splitlines() if len(line) > 100]
        assert all(len(line.split()) == 1 for line in wide), wide


def test_report_says_a_nan_difference_of_an_older_file_was_ranked_by_its_bits(typed, tmp_path, stored):
    def nan_repeat(data, **new_keys):
        data = copy.deepcopy(data)
        for entry in data["benchmarks"]:
            for scenario in entry["extra_info"].get("scenarios") or ():
                if entry["group"] == "trunk/W_a/dX" and scenario["scenario"] == "repeat":
                    scenario.update(differing_runs=1, mismatched_elements=1, max_ulp=4194304, max_abs_diff=float("nan"),
                                    index=[0, 0], reference_value=1.0, actual_value=float("nan"), identical=False,
                                    outcome=None, **new_keys)
        return data

    said = "NaN in 3 differences (ranked there by a NaN's bit pattern"  # the group's repeat in 3 modes
    older = typed("python -m cublas_det.report", _write(tmp_path, "older.json", nan_repeat(stored)))
    assert said in " ".join(older.stdout.split()), older.stdout
    counted = typed("python -m cublas_det.report", _write(tmp_path, "new.json", nan_repeat(stored, nan_mismatches=1)))
    assert said not in " ".join(counted.stdout.split())  # a file that counts NaN pairs apart needs no note
