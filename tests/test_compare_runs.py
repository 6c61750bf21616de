"""Comparing stored runs offline: identity before bits, pairs and fleets, and re-rendering a run."""

import copy
import hashlib
import json
import pathlib
import subprocess
import sys

import pytest

from cublas_det.report.compare import compare_fleet, compare_runs
from cublas_det.runfile import run_from_dict
from cublas_det.shapes import preset

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


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "cublas_det.compare", *map(str, args)], capture_output=True,
                          text=True, timeout=120, check=False)


def test_a_run_against_itself_is_identical_exit_0(tmp_path, stored):
    path = _write(tmp_path, "run.json", stored)
    result = _cli(path, path)
    assert result.returncode == 0, result.stderr
    assert "compared 45: 45 identical, 0 differ; 0 with other inputs, 15 without a digest" in result.stdout
    assert "DIFFER" not in result.stdout


def test_another_seed_is_inputs_differ_exit_2_never_bits_differ(stored):
    other = _with_identity(stored, seed=1)
    for entry in other["benchmarks"]:
        if entry["extra_info"].get("digest"):
            entry["extra_info"]["digest"] = "f" * 64  # other inputs, other bits: must not read as a drift
    comparison = compare_runs(run_from_dict(stored, "base.json"), run_from_dict(other, "new.json"))
    assert comparison.exit_code == 2 and not any("bits DIFFER" in line for line in comparison.lines)
    assert any(line.endswith("inputs differ, not comparable: seed 0 vs 1; the input digests differ")
               for line in comparison.lines)
    assert "nothing comparable" in comparison.lines[-1]


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


def test_one_changed_digest_is_bits_differ_exit_1(tmp_path, stored):
    doctored = copy.deepcopy(stored)
    doctored["benchmarks"][8]["extra_info"]["digest"] = "0" * 64
    result = _cli(_write(tmp_path, "a.json", stored), _write(tmp_path, "b.json", doctored))
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
    assert any("time SLOWER +20.0%" in line and "REGRESSION (> 10%)" in line for line in comparison.lines)
    assert any("time SAME +0.0%" in line for line in comparison.lines)  # the untouched entries
    noisy = copy.deepcopy(stored)  # the same median, but samples spread wide: not a verdict to fail on
    stats = noisy["benchmarks"][1]["stats"]
    stats["data"] = [x * (0.5 + i % 3 * 0.5) for i, x in enumerate(stats["data"])]
    stats["median"] *= 1.2
    comparison = compare_runs(base, run_from_dict(noisy, "c.json"), fail_on_pct=10)
    assert comparison.exit_code == 0 and any("time UNSURE" in line for line in comparison.lines)


def test_a_file_of_version_0_1_is_read_with_a_note(stored):
    legacy = json.loads(LEGACY.read_text())
    comparison = compare_runs(run_from_dict(legacy, "old.json"), run_from_dict(stored, "new.json"))
    assert comparison.exit_code == 0  # the bits of 0.1 and of this version agree on the H200
    assert "compared 45: 45 identical, 0 differ; 0 with other inputs, 15 without a digest" in comparison.lines
    assert comparison.lines[2].startswith("note: old.json was written by cublas_det 0.1.0, which recorded no seed")


def test_a_fleet_of_three_groups_the_odd_file_with_its_machine(tmp_path, stored):
    odd = copy.deepcopy(stored)
    odd["machine_info"]["gpu"]["sm_count"] = 114
    odd["machine_info"]["gpu"]["name"] = "NVIDIA H100"
    for entry in odd["benchmarks"]:
        if entry["group"] == "trunk/W_a/dW" and entry["extra_info"].get("digest"):
            entry["extra_info"]["digest"] = "c" * 64
    paths = [_write(tmp_path, f"node-{i}.json", data) for i, data in enumerate((stored, stored, odd))]
    result = _cli(*paths)
    assert result.returncode == 1, result.stderr
    line = next(x for x in result.stdout.splitlines() if x.startswith("trunk/W_a/dW (128x128x4096:nt) PEDANTIC"))
    assert line.startswith("trunk/W_a/dW (128x128x4096:nt) PEDANTIC: 2 groups: [node-0.json, node-1.json]")
    assert "| [node-2.json] cccccccccccc on NVIDIA H100, 114 SMs, driver 13.0, cuBLAS 13.1.0" in line
    assert "trunk/W_in/dW (128x56x4096:nt) PEDANTIC: all 3 agree" in result.stdout
    assert "compared 45 GEMM/configuration pairs present in two or more places: 42 agree, 3 differ" in result.stdout


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


def test_report_re_renders_a_stored_run(tmp_path):
    markdown = tmp_path / "run.md"
    result = subprocess.run([sys.executable, "-m", "cublas_det.report", str(STORED), "--markdown", str(markdown)],
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("cublas_det 0.1.0 on NVIDIA H200 (132 SMs), cuBLAS 13.1.0, driver 13.0")
    lines = result.stdout.splitlines()
    assert lines[2].startswith("Reproducible: yes, all 45 shape/mode pairs")  # the answer first
    assert max(len(line) for line in lines) <= 100  # every line fits 100 columns
    assert any(line.startswith("Verdict: pass") for line in lines[:12])
    legacy = subprocess.run([sys.executable, "-m", "cublas_det.report", str(LEGACY)], capture_output=True, text=True,
                            timeout=120, check=False)
    assert legacy.returncode == 0 and "FAILED (documented as reproducible" in legacy.stdout  # that run's upload race
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
    assert "128x56x4096:nt[PEDANTIC] (128x56x4096:nt): identical bits, time SAME +0.0% [-0.3%, +0.3%]" in \
        comparison.lines
    assert not any("only in" in line for line in comparison.lines)
    assert "compared 45: 45 identical, 0 differ; 0 with other inputs, 15 without a digest" in comparison.lines


def test_a_fleet_pairs_a_custom_shape_with_the_preset_role_of_the_same_gemm(stored):
    custom = _renamed(stored, "trunk/W_in/dW", "128x56x4096:nt")
    for entry in custom["benchmarks"]:
        if entry["group"] == "128x56x4096:nt" and entry["extra_info"].get("digest"):
            entry["extra_info"]["digest"] = "c" * 64
    runs = [run_from_dict(data, name) for data, name in ((stored, "a.json"), (stored, "b.json"), (custom, "c.json"))]
    comparison = compare_fleet(runs)
    assert comparison.exit_code == 1
    line = next(x for x in comparison.lines if x.startswith("trunk/W_in/dW (128x56x4096:nt) PEDANTIC"))
    assert "2 groups: [a.json, b.json]" in line and "| [c.json as 128x56x4096:nt] cccccccccccc" in line
    assert "compared 45 GEMM/configuration pairs present in two or more places: 42 agree, 3 differ" in comparison.lines
    # Two files that name the GEMM by its spec: the preset's role, in one file alone, joins them.
    runs = [run_from_dict(data, name) for data, name in ((stored, "a.json"), (custom, "c.json"), (custom, "d.json"))]
    line = next(x for x in compare_fleet(runs).lines if x.startswith("128x56x4096:nt (128x56x4096:nt) PEDANTIC"))
    assert "2 groups: [c.json, d.json] cccccccccccc" in line and "| [a.json as trunk/W_in/dW]" in line
    # Two files of each naming, in any order: one comparison of all four, which differs.
    for names in (("a", "b", "c", "d"), ("c", "a", "d", "b")):
        runs = [run_from_dict(stored if name in "ab" else custom, f"{name}.json") for name in names]
        comparison = compare_fleet(runs)
        assert comparison.exit_code == 1
        line = next(x for x in comparison.lines if "(128x56x4096:nt) PEDANTIC" in x)
        # Named by the preset's role in either order (the tie in files goes to it), the custom files moved.
        assert line.startswith("trunk/W_in/dW (128x56x4096:nt) PEDANTIC: 2 groups: ")
        assert "[a.json, b.json]" in line and "[c.json as 128x56x4096:nt, d.json as 128x56x4096:nt] cccccccccccc" in line
        assert not any("all 2 agree" in x for x in comparison.lines if "128x56x4096:nt" in x)
