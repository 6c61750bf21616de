"""``python -m cublas_det.diff``: generated runs in every layout, planted divergences, errors, memory."""

import json
import os
import struct
import subprocess
import sys
import tracemalloc
import warnings

import numpy as np
import pytest

from cublas_det import diff as diff_cli
from cublas_det.cli.common import prog_name
from cublas_det.rundiff.diff import LeafStatus, diff_runs
from cublas_det.rundiff.layouts import open_run
from cublas_det.trace import Recorder

from .conftest import unwrapped

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROG = f"{os.path.basename(sys.executable)} -m cublas_det.diff"  # the name the user typed
SEED_LEAVES = [f"l{i:02d}" for i in range(26)]
PLANTED = "l07"
PLANTED_AT = (130, 1000, 4000)  # elements of the planted leaf of run B that differ at step 2


def _cli(*args):
    env = {**os.environ, "PYTHONPATH": REPO + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", "cublas_det.diff", *map(str, args)], capture_output=True,
                          text=True, timeout=120, cwd=REPO, env=env, check=False)


def _main(capsys, *args):
    code = diff_cli.main([str(arg) for arg in args])
    out, err = capsys.readouterr()
    err = unwrapped(err)
    return code, out, err


def seed_values(step: int, leaf: int, diverged: bool) -> np.ndarray:
    """Leaf ``leaf`` of step ``step`` of the seed note's runs: 4096 float32 values per leaf.

    Run B has the same values as run A at step 1; at step 2 three elements of PLANTED are one
    or two ULP away; from step 3 on every leaf differs a little (the divergence has spread).
    """
    values = np.random.default_rng(1000 * step + leaf).standard_normal(4096).astype(np.float32)
    if not diverged:
        return values
    if step == 2 and SEED_LEAVES[leaf] == PLANTED:
        index = list(PLANTED_AT)
        values[index] = np.nextafter(values[index], np.float32(np.inf))
        values[4000] = np.nextafter(values[4000], np.float32(np.inf))  # two ULP there
    elif step >= 3:
        values = values * np.float32(1.0 + 2.0 ** -20)
    return values


def write_seed_run(root, diverged: bool, steps=(1, 2, 3), flat=False):
    """Raw float32 binaries per step, as the seed note's trainer dumped them."""
    for step in steps:
        for leaf, name in enumerate(SEED_LEAVES):
            path = root / (f"step{step}_{name}.bin" if flat else f"step_{step}/{name}.bin")
            path.parent.mkdir(parents=True, exist_ok=True)
            seed_values(step, leaf, diverged).tofile(path)
    return root


@pytest.fixture
def seed_runs(tmp_path):
    return write_seed_run(tmp_path / "a", False), write_seed_run(tmp_path / "b", True)


def test_seed_note_runs_first_divergence_at_step_2_in_the_planted_leaf(seed_runs):
    result = _cli(*seed_runs)
    assert result.returncode == 1, result.stderr
    assert result.stderr == ""
    lines = result.stdout.splitlines()
    assert lines[2] == f"first divergence: step 2, leaf {PLANTED}"
    assert "step 1: all 26 leaves equal" in lines
    assert "step 2: 1 of 26 leaves diverges" in lines
    row = next(line.split() for line in lines if line.strip().startswith(PLANTED))
    a, b = seed_values(2, 7, False).astype(np.float64), seed_values(2, 7, True).astype(np.float64)
    # located at the worst element (2 ULP at 4000), not at the first mismatch (130)
    assert row[:7] == [PLANTED, "DIVERGE", "3/4096", "(<0.1%)", "2", f"{np.abs(a - b).max():.3g}", "[4000]"]
    assert "step 3" not in result.stdout and "1 later step not compared" in result.stdout
    assert lines[-1] == f"first divergence at step 2 in leaf {PLANTED}; all of step 1 equal"


def test_all_goes_on_past_the_first_divergent_step(seed_runs, capsys):
    code, out, _ = _main(capsys, *seed_runs, "--all")
    assert code == 1
    assert "step 3: 26 of 26 leaves diverge" in out and "divergent steps: 2, 3" in out
    assert out.splitlines()[-1] == f"first divergence at step 2 in leaf {PLANTED}; all of step 1 equal"


def test_flat_file_names_and_identical_runs(tmp_path, capsys):
    a = write_seed_run(tmp_path / "a", False, flat=True)
    b = write_seed_run(tmp_path / "b", False, steps=(1, 2, 3))
    code, out, _ = _main(capsys, a, b)
    assert code == 0
    assert out.splitlines()[-1] == "identical: 78 leaves in 3 steps, all bits equal"
    (a / "step3_l05.bin").rename(a / "step_3_l05.bin")  # step_<N>_<leaf>.bin is read the same way
    assert _main(capsys, a, b)[0] == 0


def test_verbose_prints_the_tables_of_equal_steps(seed_runs, capsys):
    _, out, _ = _main(capsys, *seed_runs, "-v")
    assert "step 1: all 26 leaves equal" in out
    assert sum(line.split() == ["l00", "equal"] for line in out.splitlines()) == 2  # tables of steps 1 and 2


def _npy_run(root, arrays_per_step):
    for step, arrays in arrays_per_step.items():
        (root / f"step_{step}").mkdir(parents=True)
        for name, array in arrays.items():
            np.save(root / f"step_{step}" / f"{name}.npy", array)
    return root


def test_npy_runs_report_the_worst_index_in_the_leaf_shape(tmp_path, capsys):
    w = np.arange(12, dtype=np.float32).reshape(3, 4)
    w_b = w.copy()
    w_b[1, 2] += 0.5
    a = _npy_run(tmp_path / "a", {0: {"w": w, "x": w}, 1: {"w": w, "x": w}})
    b = _npy_run(tmp_path / "b", {0: {"w": w, "x": w}, 1: {"w": w_b, "x": w}})
    code, out, _ = _main(capsys, a, b)
    assert code == 1
    row = next(line for line in out.splitlines() if line.strip().startswith("w "))
    assert "1/12 (8.3%)" in row and "[1, 2]" in row and "A 6.0, B 6.5" in row
    assert out.splitlines()[-1] == "first divergence at step 1 in leaf w; all of step 0 equal"


def test_fortran_order_npy_is_compared_in_c_order(tmp_path, capsys):
    w = np.arange(24, dtype=np.float32).reshape(4, 6)
    a = _npy_run(tmp_path / "a", {0: {"w": np.asfortranarray(w)}})
    b = _npy_run(tmp_path / "b", {0: {"w": w}})
    assert _main(capsys, a, b)[0] == 0
    w2 = w.copy()
    w2[3, 1] = -1
    c = _npy_run(tmp_path / "c", {0: {"w": np.asfortranarray(w2)}})
    code, out, _ = _main(capsys, a, c, "--chunk-mib", str(24 / 2**20))  # 24-byte chunks: several row blocks
    assert code == 1 and "[3, 1]" in out


def test_npz_per_step_and_single_npz_file(tmp_path, capsys):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    x = np.linspace(-1, 1, 50, dtype=np.float32)
    for step in (1, 2):
        np.savez(a / f"step{step}.npz", x=x * step, y=x)
        y = x.copy()
        y[9] += np.float32(step == 2)
        np.savez_compressed(b / f"step_{step}.npz", x=x * step, y=y)  # read while decompressed
    code, out, _ = _main(capsys, a, b)
    assert code == 1 and "numpy .npz" in out
    row = next(line for line in out.splitlines() if line.strip().startswith("y "))
    assert "1/50 (2.0%)" in row and "[9]" in row
    np.savez(tmp_path / "one.npz", x=x, y=x)
    np.savez(tmp_path / "two.npz", x=x, y=x + 1)
    code, out, _ = _main(capsys, tmp_path / "one.npz", tmp_path / "two.npz")
    assert code == 1 and out.splitlines()[-1] == "first divergence at step 0 in leaf y; no step before it"


def write_safetensors(path, tensors):
    """The safetensors layout by hand: u64 header length, JSON header, data (no package needed)."""
    codes = {"float32": "F32", "float16": "F16", "int64": "I64", "uint16": "BF16"}
    header, blobs, offset = {"__metadata__": {"format": "np"}}, [], 0
    for name, array in tensors.items():
        raw = np.ascontiguousarray(array).tobytes()
        header[name] = {"dtype": codes[array.dtype.name], "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def test_safetensors_runs_bfloat16_included(tmp_path, capsys):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    bf16 = np.array([0x3F80, 0x4000, 0xC040], np.uint16)  # 1.0, 2.0, -3.0 as bfloat16 bits
    bf16_b = bf16.copy()
    bf16_b[2] += 1  # one ULP further from zero
    for step in (0, 1):
        write_safetensors(a / f"step_{step}.safetensors", {"h": np.ones((2, 3), np.float16), "g": bf16})
        write_safetensors(b / f"step{step}.safetensors", {"h": np.ones((2, 3), np.float16),
                                                           "g": bf16_b if step else bf16})
    code, out, _ = _main(capsys, a, b)
    assert code == 1
    row = next(line for line in out.splitlines() if line.strip().startswith("g "))
    assert "1/3 (33.3%)" in row and row.split()[4] == "1" and "[2]" in row and "A -3.0, B -3.02" in row


def test_safetensors_written_by_the_package(tmp_path, capsys):
    safetensors_numpy = pytest.importorskip("safetensors.numpy")
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    tensors = {"w": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.zeros(4, np.int64)}
    safetensors_numpy.save_file(tensors, str(a / "step_1.safetensors"))
    safetensors_numpy.save_file({**tensors, "w": tensors["w"] * 2}, str(b / "step_1.safetensors"))
    code, out, _ = _main(capsys, a, b)
    assert code == 1 and "step 1: 1 of 2 leaves diverge" in out and "[0, 1]" in out


def _record(directory, values_per_step, mode="digest", order=None):
    with Recorder(directory, mode=mode) as recorder:
        for step, leaves in values_per_step.items():
            for name in order or leaves:
                recorder.record(step, name, leaves[name])
    return directory


def test_digest_logs_keep_the_recording_order(tmp_path, capsys):
    base = {"z_first": np.ones(5, np.float32), "a_second": np.zeros(5, np.float32)}
    changed = {"z_first": np.full(5, 2, np.float32), "a_second": np.ones(5, np.float32)}
    a = _record(tmp_path / "a", {0: base, 1: base})
    b = _record(tmp_path / "b", {0: base, 1: changed})
    code, out, _ = _main(capsys, a, b)
    assert code == 1
    table = [line.split()[0] for line in out.splitlines() if line.startswith("  ") and "DIVERGE" in line]
    assert table == ["z_first", "a_second"]  # recording order, not name order
    assert out.splitlines()[-1] == "first divergence at step 1 in leaf z_first; all of step 0 equal"
    assert "digest differs" in out
    (tmp_path / "order.txt").write_text("# compare the bias first\na_second\n\nnot_a_leaf\n")
    _, out, _ = _main(capsys, a, b, "--order", tmp_path / "order.txt")
    assert out.splitlines()[-1] == "first divergence at step 1 in leaf a_second; all of step 0 equal"
    assert _main(capsys, a / "trace.jsonl", b)[0] == 1  # the log file itself is a run too


def test_full_recording_against_digests_and_against_raw_dumps(tmp_path, capsys):
    steps = {step: {"w": np.arange(64, dtype=np.float32) * step, "x": np.full((4, 4), step, np.float16)}
             for step in range(3)}
    full = _record(tmp_path / "full", steps, mode="full")
    digests = _record(tmp_path / "digests", steps)
    assert _main(capsys, full, digests)[0] == 0
    raw = tmp_path / "raw"
    for step, leaves in steps.items():
        (raw / f"step_{step}").mkdir(parents=True)
        leaves["w"].tofile(raw / f"step_{step}" / "w.bin")
    code, out, _ = _main(capsys, full, raw)  # raw dumps have no x: reported, not a crash
    assert code == 1 and "missing in B" in out
    changed = {**steps, 2: {**steps[2], "w": steps[2]["w"] + np.float32(1)}}
    code, out, _ = _main(capsys, full, _record(tmp_path / "full2", changed, mode="full"))
    assert code == 1 and "64/64 (100.0%)" in out and "first divergence at step 2 in leaf w" in out


def test_nan_and_signed_zero_cases(tmp_path, capsys):
    nan = np.float32(np.nan)
    a = _npy_run(tmp_path / "a", {0: {"nan_same": np.array([nan, 1], np.float32),
                                      "nan_vs_number": np.array([nan, 1, 2], np.float32),
                                      "zeros": np.array([0.0, 0.0, 5.0], np.float32)}})
    b = _npy_run(tmp_path / "b", {0: {"nan_same": np.array([nan, 1], np.float32),
                                      "nan_vs_number": np.array([3, 1, 2], np.float32),
                                      "zeros": np.array([0.0, -0.0, 5.0], np.float32)}})
    code, out, _ = _main(capsys, a, b)
    assert code == 1
    rows = {line.split()[0]: line for line in out.splitlines() if line.startswith("  ") and "leaf" not in line}
    assert rows["nan_same"].split()[1] == "equal"
    assert rows["nan_vs_number"].split()[1:5] == ["DIVERGE", "1/3", "(33.3%)", "nan"]
    assert "A nan, B 3.0" in rows["nan_vs_number"] and "1 with NaN" in rows["nan_vs_number"]
    assert rows["zeros"].split()[1:6] == ["DIVERGE", "1/3", "(33.3%)", "0", "0"]
    assert "signed zero only" in rows["zeros"] and "A 0.0, B -0.0" in rows["zeros"]


def test_a_nan_pair_beside_numbers_is_counted_apart_and_the_worst_number_located(tmp_path, capsys):
    """The record's policy in the table and the JSON: NaN pairs outside max_ulp, the location a number's."""
    nan = np.float32(np.nan)
    w = np.array([[nan, 1.0, 2.0], [0.0, 4.0, 8.0]], np.float32)
    w_b = np.array([[1.0, np.nextafter(np.float32(1), np.float32(2)), 2.0], [-0.0, 4.0, 8.0 + 2.0 ** -19]],
                   np.float32)  # a NaN pair first, then 1 ULP, a signed zero, 2 ULP
    a, b = _npy_run(tmp_path / "a", {0: {"w": w}}), _npy_run(tmp_path / "b", {0: {"w": w_b}})
    code, out, _ = _main(capsys, a, b, "--json", tmp_path / "diff.json")
    row = next(line for line in out.splitlines() if line.strip().startswith("w "))
    assert code == 1 and row.split()[1:6] == ["DIVERGE", "4/6", "(66.7%)", "nan", "1.91e-06"] and "[1, 2]" in row
    assert "A 8.0, B 8.000002" in row
    assert "1 signed zero" in row and "1 with NaN; others up to 2 ULP" in row
    (leaf,) = json.loads((tmp_path / "diff.json").read_text())["steps"][0]["leaves"]
    assert {key: leaf[key] for key in ("mismatched_elements", "total_elements", "max_ulp", "index",
                                       "nan_mismatches", "signed_zero_mismatches")} == \
        {"mismatched_elements": 4, "total_elements": 6, "max_ulp": 2, "index": [1, 2], "nan_mismatches": 1,
         "signed_zero_mismatches": 1}
    assert leaf["max_abs_diff"] == 2.0 ** -19
    assert (leaf["reference_value"], leaf["actual_value"]) == (8.0, 8 + 2.0 ** -19)


def test_missing_reshaped_and_retyped_leaves_and_steps_are_reported(tmp_path, capsys):
    w = np.zeros((2, 3), np.float32)
    a = _npy_run(tmp_path / "a", {0: {"w": w, "only_a": w, "shape": w, "dtype": w}, 1: {"w": w}})
    b = _npy_run(tmp_path / "b", {0: {"w": w, "only_b": w, "shape": w.reshape(3, 2),
                                      "dtype": w.astype(np.float16)}})
    code, out, _ = _main(capsys, a, b, "--all")
    assert code == 1
    rows = {line.split()[0]: line for line in out.splitlines() if line.startswith("  ") and "status" not in line}
    assert "missing in B" in rows["only_a"] and "only A has it: float32[2, 3]" in rows["only_a"]
    assert "missing in A" in rows["only_b"]
    assert "shape differs" in rows["shape"] and "A float32[2, 3], B float32[3, 2]" in rows["shape"]
    assert "dtype differs" in rows["dtype"] and "B float16[2, 3]" in rows["dtype"]
    assert "B ends at step 0; A goes on to step 1 (1 step more, not compared)" in out  # the step B does not have
    assert out.splitlines()[-1] == "first divergence at step 0 in leaf dtype (dtype differs); no step before it"


def test_raw_bfloat16_and_float16_with_dtype(tmp_path, capsys):
    for run, last in (("a", 0x3F80), ("b", 0x3F81)):
        (tmp_path / run / "step_0").mkdir(parents=True)
        np.array([0x4000, last], np.uint16).tofile(tmp_path / run / "step_0" / "g.bin")
    code, out, _ = _main(capsys, tmp_path / "a", tmp_path / "b", "--dtype", "bfloat16")
    assert code == 1 and "A 1.0, B 1.01" in out
    code, out, _ = _main(capsys, tmp_path / "a", tmp_path / "b", "--dtype", "float16")
    assert code == 1 and "1/2 (50.0%)" in out


def test_json_output(seed_runs, tmp_path, capsys):
    code, _, _ = _main(capsys, *seed_runs, "--json", tmp_path / "diff.json")
    data = json.loads((tmp_path / "diff.json").read_text())
    assert code == 1 and data["identical"] is False and data["first_divergence"] == {"step": 2, "leaf": PLANTED}
    planted = next(leaf for leaf in data["steps"][1]["leaves"] if leaf["leaf"] == PLANTED)
    assert planted["mismatched_elements"] == 3 and planted["max_ulp"] == 2 and planted["index"] == [4000]
    assert planted["total_elements"] == 4096 and planted["nan_mismatches"] == planted["signed_zero_mismatches"] == 0
    assert data["not_compared"] == [3]


def test_chunk_size_does_not_change_the_result(seed_runs):
    run_a, run_b = (open_run(str(path)) for path in seed_runs)
    # 1000-element chunks: PLANTED_AT in the first, first of the second, and the last, partial one
    small = diff_runs(run_a, run_b, all_steps=True, chunk_bytes=4000)
    large = diff_runs(run_a, run_b, all_steps=True)
    assert small == large
    planted = next(leaf for leaf in large.steps[1].leaves if leaf.leaf == PLANTED)
    assert planted.status is LeafStatus.DIVERGE and planted.stats.index == (4000,)


def test_memory_stays_bounded_while_streaming(tmp_path):
    n = 4 << 20  # 16 MiB per leaf and run
    values = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    for run, data in (("a", values), ("b", values), ("c", np.nextafter(values, np.float32(1)))):
        (tmp_path / run / "step_0").mkdir(parents=True)
        data.tofile(tmp_path / run / "step_0" / "x.bin")
    del values, data
    runs = {run: open_run(str(tmp_path / run)) for run in "abc"}
    tracemalloc.start()
    try:
        equal = diff_runs(runs["a"], runs["b"], chunk_bytes=1 << 20)
        _, equal_peak = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        every = diff_runs(runs["a"], runs["c"], chunk_bytes=1 << 20)
        _, diverged_peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert equal.identical and every.steps[0].leaves[0].stats.mismatched_elements == n
    assert equal_peak < 8 << 20 and diverged_peak < 8 << 20, (equal_peak, diverged_peak)  # half of one leaf


# -- errors: one line, exit 2 --------------------------------------------------------------------
def _error(typed, *args):
    result = typed("python -m cublas_det.diff", *args)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{PROG}: error: "), result.stderr
    return lines[0]


def test_missing_directory_and_non_run_paths(typed, tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "notes.txt").write_text("x")
    assert "no such file or directory" in _error(typed, tmp_path / "nope", tmp_path / "empty")
    assert "no steps found" in _error(typed, tmp_path / "empty", tmp_path / "empty")
    assert "not a run" in _error(typed, tmp_path / "notes.txt", tmp_path / "empty")


def test_bad_dtype_and_bad_options(typed, tmp_path, seed_runs):
    assert "unknown dtype 'float8'" in _error(typed, *seed_runs, "--dtype", "float8")
    assert "the following arguments are required" in _error(typed, seed_runs[0])
    assert "does not exist" in _error(typed, *seed_runs, "--json", tmp_path / "no" / "x.json")


def test_unreadable_order_file_is_one_line(typed, tmp_path, seed_runs):
    assert "none.txt: no such file" in _error(typed, *seed_runs, "--order", tmp_path / "none.txt")


def test_raw_file_size_not_a_multiple_of_the_dtype(typed, tmp_path):
    (tmp_path / "a" / "step_0").mkdir(parents=True)
    (tmp_path / "a" / "step_0" / "x.bin").write_bytes(b"\0" * 10)
    message = _error(typed, tmp_path / "a", tmp_path / "a")
    assert "10 bytes is not a whole number of float32 elements" in message


def test_malformed_logs(typed, tmp_path):
    run = tmp_path / "a"
    run.mkdir()
    good = json.dumps({"step": 0, "leaf": "x", "dtype": "float32", "shape": [2], "digest": "0" * 32})
    cases = [
        ("{not json", "trace.jsonl:2: malformed JSON line"),
        (json.dumps({"step": 0, "leaf": "y", "dtype": "float32", "shape": [2]}), "digest: missing"),
        (json.dumps({"step": -1, "leaf": "y", "dtype": "float32", "shape": [2], "digest": "0" * 32}), "step: expected an integer from 0"),
        (json.dumps({"step": 0, "leaf": "y", "dtype": "f8", "shape": [2], "digest": "0" * 32}), "unknown dtype"),
        (json.dumps({"step": 0, "leaf": "y", "dtype": "float32", "shape": [2], "digest": "0" * 32,
                     "algorithm": "sha256"}), "algorithm: expected 'wsum128-v1'"),
        (json.dumps({"step": 0, "leaf": "y", "dtype": "float32", "shape": [2], "digest": "xyz"}), "hex digits"),
        (good, "recorded twice"),
        (json.dumps({"step": 0, "leaf": "y", "dtype": "float32", "shape": [2], "digest": "0" * 32,
                     "file": "step_0/y.bin"}), "y.bin: no such file"),
    ]
    for line, message in cases:
        (run / "trace.jsonl").write_text(good + "\n" + line + "\n")
        assert message in _error(typed, run, run), line


def test_corrupt_and_truncated_numpy_files(typed, tmp_path):
    (tmp_path / "a" / "step_0").mkdir(parents=True)
    (tmp_path / "a" / "step_0" / "x.npy").write_bytes(b"not an npy file at all")
    assert "not a readable .npy file" in _error(typed, tmp_path / "a", tmp_path / "a")
    np.save(tmp_path / "a" / "step_0" / "x.npy", np.zeros(100, np.float32))
    with open(tmp_path / "a" / "step_0" / "x.npy", "r+b") as stream:
        stream.truncate(200)
    assert "bytes, but its dtype and shape need" in _error(typed, tmp_path / "a", tmp_path / "a")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "step_0.npz").write_bytes(b"PK\x03\x04 broken")
    assert "not a readable .npz file" in _error(typed, tmp_path / "b", tmp_path / "b")
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "step_0.safetensors").write_bytes(struct.pack("<Q", 1000) + b"{}")
    assert "not a safetensors file" in _error(typed, tmp_path / "c", tmp_path / "c")


def test_untyped_bfloat16_npy_needs_dtype(typed, tmp_path, capsys):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    run = _npy_run(tmp_path / "a", {0: {"g": np.ones(4, ml_dtypes.bfloat16)}})
    assert "pass --dtype bfloat16" in _error(typed, run, run)
    assert _main(capsys, run, run, "--dtype", "bfloat16")[0] == 0


def test_help_has_defaults_and_examples(typed):
    result = typed("python -m cublas_det.diff", "--help")
    assert result.returncode == 0
    for fragment in ("examples:", "(default: float32)", "--all", "--order FILE", "exit codes"):
        assert fragment in result.stdout


def test_damaged_compressed_npz_member_is_one_line(typed, tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    values = np.random.default_rng(0).standard_normal(50_000).astype(np.float32)
    np.savez_compressed(tmp_path / "a" / "step_0.npz", x=values)
    np.savez_compressed(tmp_path / "b" / "step_0.npz", x=values)
    damaged = bytearray((tmp_path / "b" / "step_0.npz").read_bytes())
    middle = len(damaged) // 2
    damaged[middle:middle + 64] = bytes(64)  # inside the deflate stream, past the .npy header
    (tmp_path / "b" / "step_0.npz").write_bytes(bytes(damaged))
    assert "read failed" in _error(typed, tmp_path / "a", tmp_path / "b")


def test_the_worked_example_of_docs_diff(tmp_path, monkeypatch, capsys):
    """docs/diff.md's worked example runs and gives the verdict and the dW2 row it shows."""
    readme = open(os.path.join(REPO, "docs", "diff.md"), encoding="utf-8").read()
    section = readme[readme.index("Worked example"):]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    shown = section.split("```text\n", 1)[1].split("```", 1)[0].splitlines()
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "README example", "exec"), {})
    code_, out, _ = _main(capsys, "runs/a", "runs/b")
    lines = out.splitlines()
    assert code_ == 1 and lines[-1] == shown[-3] and lines[2] == shown[3]
    row = next(line for line in lines if line.strip().startswith("dW2"))
    shown_row = next(line for line in shown if line.strip().startswith("dW2"))
    # the values depend on this machine's BLAS; the facts of the planted change do not
    assert row.split()[:5] == shown_row.split()[:5] == ["dW2", "DIVERGE", "1/4096", "(<0.1%)", "1"]
    assert "[12, 40]" in row and "[12, 40]" in shown_row


# -- never more than was compared; never a crash or a hang on a file ---------------------------------
def _error_line(capsys, *args):
    code, out, err = _main(capsys, *args)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return code, out, lines[0]


@pytest.mark.parametrize("content", ["empty", "notes", "pt", "empty_safetensors"])
def test_a_comparison_of_nothing_exits_2_naming_what_was_skipped_and_the_layouts(tmp_path, capsys, content,
                                                                                   monkeypatch):
    """Step directories holding nothing that is read said 'identical: 0 leaves' and exited 0."""
    monkeypatch.setitem(sys.modules, "torch", None)  # a .pt file without PyTorch
    for run in ("a", "b"):
        step = tmp_path / run / "step_1"
        step.mkdir(parents=True)
        if content == "notes":
            (step / "notes.txt").write_text("lr 0.1")
        elif content == "pt":
            (step / "model.pt").write_bytes(b"PK not read")
        elif content == "empty_safetensors":
            write_safetensors(step / "model.safetensors", {})
    code, out, line = _error_line(capsys, tmp_path / "a", tmp_path / "b")
    assert code == 2 and out == ""
    assert "identical" not in line and "nothing compared: no leaf is in both runs" in line
    assert "diff reads trace.jsonl; step_<N>/<leaf>.bin or .npy; step_<N>/<file>.safetensors, .npz or .pt" in line
    if content == "notes":
        assert "skipped A: step_1/notes.txt, B: step_1/notes.txt" in line
    if content == "pt":
        assert "A: step_1/model.pt (a .pt file: PyTorch is not installed to read it; pip install torch)" in line
    from cublas_det.testing import assert_runs_identical

    with pytest.raises(AssertionError, match="^Runs were not compared: nothing compared"):
        assert_runs_identical(tmp_path / "a", tmp_path / "b")


def test_per_step_checkpoints_are_read_as_file_key_leaves(tmp_path, capsys):
    """step_N/model.safetensors and step_N/optim.npz, as trainers write them: one leaf per tensor."""
    w = np.arange(12, dtype=np.float32).reshape(3, 4)
    for run, last in (("a", w), ("b", w + np.float32(1))):
        for step in (1, 2):
            directory = tmp_path / run / f"step_{step}"
            directory.mkdir(parents=True)
            write_safetensors(directory / "model.safetensors", {"layer.w": w, "layer.v": w[0]})
            np.savez(directory / "optim.npz", exp_avg=last if step == 2 else w)
    code, out, _ = _main(capsys, tmp_path / "a", tmp_path / "b")
    assert code == 1, out
    assert "step 1: all 3 leaves equal" in out
    assert out.splitlines()[-1] == "first divergence at step 2 in leaf optim.npz:exp_avg; all of step 1 equal"
    assert "model.safetensors:layer.w  equal" in out


class _FakeTensor:
    """What the .pt reader uses of a torch.Tensor: dtype, shape, detach, contiguous, view, numpy."""

    def __init__(self, array):
        self._array = np.asarray(array)
        self.dtype = f"torch.{self._array.dtype.name}"
        self.shape = self._array.shape

    def detach(self):
        return self

    def contiguous(self):
        return self

    def view(self, dtype):
        return self

    def numpy(self):
        return self._array


def test_pt_state_dicts_are_read_through_torch(tmp_path, capsys, monkeypatch):
    """Nested state dicts (an optimizer's) flattened with '.'; values that are not tensors left out."""
    import types

    states = {"a": {"model": {"w": _FakeTensor(np.ones(4, np.float32))},
                    "optim": {"state": {0: {"exp_avg": _FakeTensor(np.zeros(2, np.float32))}}, "lr": 0.1}},
              "b": {"model": {"w": _FakeTensor(np.ones(4, np.float32))},
                    "optim": {"state": {0: {"exp_avg": _FakeTensor(np.array([0.0, 1e-3], np.float32))}}, "lr": 0.1}}}
    fake = types.SimpleNamespace(Tensor=_FakeTensor, bfloat16="torch.bfloat16", int16="torch.int16",
                                 load=lambda path, **_: states[os.path.basename(os.path.dirname(
                                     os.path.dirname(path)))])
    monkeypatch.setitem(sys.modules, "torch", fake)
    for run in ("a", "b"):
        (tmp_path / run / "step_0").mkdir(parents=True)
        (tmp_path / run / "step_0" / "ckpt.pt").write_bytes(b"a torch file")
    code, out, _ = _main(capsys, tmp_path / "a", tmp_path / "b")
    assert code == 1, out
    assert out.splitlines()[-1] == "first divergence at step 0 in leaf ckpt.pt:optim.state.0.exp_avg; no step before it"
    assert "ckpt.pt:model.w" in out and "lr" not in out


def test_pt_state_dicts_with_real_torch(tmp_path, capsys):
    torch = pytest.importorskip("torch")
    for run, value in (("a", 1.0), ("b", 1.0)):
        (tmp_path / run / "step_3").mkdir(parents=True)
        torch.save({"w": torch.full((2, 3), value, dtype=torch.bfloat16), "step": 3}, tmp_path / run / "step_3" / "m.pt")
    code, out, _ = _main(capsys, tmp_path / "a", tmp_path / "b")
    assert code == 0 and out.splitlines()[-1] == "identical: 1 leaf in 1 step, all bits equal"


def test_a_read_error_keeps_the_steps_compared_before_it(tmp_path, capsys):
    """Step 3 of B damaged (a bad deflate stream, found only when read): steps 1 and 2 are reported and in
    --json, then the error line, exit 2. A FIFO among the files is refused before anything is read."""
    a, b = write_seed_run(tmp_path / "a", False, steps=(1, 2)), write_seed_run(tmp_path / "b", False, steps=(1, 2))
    values = np.random.default_rng(0).standard_normal(50_000).astype(np.float32)
    for run in (a, b):
        np.savez_compressed(run / "step_3.npz", x=values)
    damaged = bytearray((b / "step_3.npz").read_bytes())
    damaged[len(damaged) // 2:len(damaged) // 2 + 64] = bytes(64)
    (b / "step_3.npz").write_bytes(bytes(damaged))
    out_json = tmp_path / "partial.json"
    code, out, err = _main(capsys, a, b, "--json", out_json)
    assert code == 2, out
    assert "steps 1-2: all equal, 26 leaves each" in out
    assert "stopped by a read error in step 3; 1 step from it on not compared" in out
    assert _verdict(out).startswith("not finished: step 3: ") and "all of steps 1-2 equal" in out
    lines = err.strip().splitlines()
    assert lines[0] == f"wrote {out_json}" and len(lines) == 2 and "Traceback" not in err
    assert ": error: " in lines[1] and "step_3.npz[x.npy]: read failed" in lines[1]
    data = json.loads(out_json.read_text())
    assert [step["step"] for step in data["steps"]] == [1, 2] and data["error"] and not data["identical"]
    os.mkfifo(b / "step_2" / "l99.bin")
    code, out, line = _error_line(capsys, a, b)
    assert code == 2 and out == "" and "step_2/l99.bin: is a FIFO (named pipe), not a file" in line


@pytest.mark.parametrize("damage", [b"PK\x03\x04 not a zip", b""])
def test_a_step_whose_file_cannot_be_listed_keeps_the_steps_before_it(tmp_path, capsys, damage):
    """Step 3 of B is not an .npz at all (refused when the run is listed, not when read): steps 1 and 2 are
    still compared and said equal, step 3 is named unreadable, exit 2; a divergence before it is exit 1."""
    a, b = write_seed_run(tmp_path / "a", False, steps=(1, 2)), write_seed_run(tmp_path / "b", False, steps=(1, 2))
    np.savez(a / "step_3.npz", x=np.ones(8, np.float32))
    (b / "step_3.npz").write_bytes(damage)
    code, out, line = _error_line(capsys, a, b)
    assert code == 2 and "steps 1-2: all equal, 26 leaves each" in out
    assert _verdict(out).startswith(f"not finished: step 3: {b / 'step_3.npz'}: not a readable .npz file")
    assert _verdict(out).endswith("before it all of steps 1-2 equal")
    assert f"{b / 'step_3.npz'}: not a readable .npz file" in line
    planted = SEED_LEAVES.index(PLANTED)
    seed_values(2, planted, True).tofile(b / "step_2" / f"{PLANTED}.bin")
    code, out, err = _main(capsys, a, b)
    assert code == 1 and _verdict(out).startswith(f"first divergence at step 2 in leaf {PLANTED}")


@pytest.mark.parametrize("a, b", [({1: "a"}, {1: "b"}), ({1: "w", 2: "w"}, {3: "w", 4: "w"})],
                         ids=["other leaves", "other steps"])
def test_runs_with_nothing_in_common_compare_nothing_exit_2_and_claim_no_divergence(tmp_path, capsys, a, b):
    """step1_a.npy against step1_b.npy, or steps 1-2 against 3-4: printed nothing and exited 1, and --json
    said "nothing_compared": true beside a "first divergence" verdict."""
    for run, leaves in (("a", a), ("b", b)):
        (tmp_path / run).mkdir()
        for step, leaf in leaves.items():
            np.save(tmp_path / run / f"step{step}_{leaf}.npy", np.ones(4, np.float32))
    code, out, err = _main(capsys, tmp_path / "a", tmp_path / "b", "--json", tmp_path / "d.json")
    line = err.strip().splitlines()[-1]
    assert code == 2 and out == "" and "error: nothing compared: no leaf is in both runs" in line
    data = json.loads((tmp_path / "d.json").read_text())
    assert data["nothing_compared"] and data["first_divergence"] is None and data["divergent_steps"] == []
    assert data["verdict"].startswith("nothing compared") and "divergence" not in data["verdict"]


def test_ctrl_c_prints_the_steps_compared_before_it_then_exits_130(tmp_path, capsys, monkeypatch):
    """Ctrl-C during an 8-step diff printed only 'error: interrupted': the steps compared were lost."""
    from cublas_det.rundiff import diff as rundiff

    runs = write_seed_run(tmp_path / "a", False, range(1, 9)), write_seed_run(tmp_path / "b", False, range(1, 9))
    real = rundiff.compare_leaf

    def compare_until_step_5(step, *args):
        if step == 5:
            raise KeyboardInterrupt
        return real(step, *args)

    monkeypatch.setattr(rundiff, "compare_leaf", compare_until_step_5)
    code, out, err = _main(capsys, *runs, "--json", tmp_path / "d.json")
    assert code == 130 and err.strip().splitlines()[-1].endswith(": error: interrupted"), err
    assert "steps 1-4: all equal, 26 leaves each" in out
    assert "stopped by Ctrl-C in step 5; 4 steps from it on not compared" in out
    assert _verdict(out) == "not finished: step 5: interrupted (Ctrl-C); before it all of steps 1-4 equal"
    data = json.loads((tmp_path / "d.json").read_text())
    assert [step["step"] for step in data["steps"]] == [1, 2, 3, 4] and not data["identical"]


def test_equal_steps_in_a_row_are_one_line_without_v(tmp_path, capsys):
    """49 steps printed 49 lines of 'step N: all 26 leaves equal' before the one that diverged."""
    a = write_seed_run(tmp_path / "a", False, range(1, 50))
    b = write_seed_run(tmp_path / "b", False, range(1, 50))
    seed_values(2, 0, True).tofile(b / "step_49" / f"{SEED_LEAVES[0]}.bin")
    code, out, _ = _main(capsys, a, b)
    lines = out.splitlines()
    assert code == 1 and lines[4:6] == ["steps 1-48: all equal, 26 leaves each", "step 49: 1 of 26 leaves diverges"]
    assert len(lines) < 40 and any(line.split()[:2] == [SEED_LEAVES[0], "DIVERGE"] for line in lines)
    code, out, _ = _main(capsys, a, b, "-v")
    assert code == 1 and "step 48: all 26 leaves equal" in out.splitlines()


def _verdict(out: str) -> str:
    """The verdict, the report's last paragraph, its wrapped lines read as one."""
    return " ".join(out.rstrip("\n").split("\n\n")[-1].split())


def _log_line(step, leaf, digest="0" * 32, **extra):
    return json.dumps({"step": step, "leaf": leaf, "dtype": "float32", "shape": [2], "digest": digest, **extra})


def test_a_cut_last_line_of_a_trace_log_is_dropped_with_a_warning(tmp_path, capsys):
    """A run killed while writing its log: only the cut line is dropped; the run ends early, not a divergence."""
    full = [_log_line(step, leaf) for step in (0, 1, 2) for leaf in ("x", "y", "z")]
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "trace.jsonl").write_text("\n".join(full) + "\n")
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "trace.jsonl").write_text("\n".join(full[:7]) + "\n" + full[7][:25])
    code, out, err = _main(capsys, tmp_path / "a", tmp_path / "b")
    assert code == 0, (out, err)
    warning = err.strip().splitlines()
    assert len(warning) == 1 and ": warning: run A: " in warning[0]
    assert "trace.jsonl:8: the last line is cut (25 bytes, no newline, not JSON); dropped" in warning[0]
    assert "step 2: 1 leaf, equal; A ended before the other 2" in out
    assert _verdict(out) == ("identical as far as A goes: A ends at step 2 (after 1 of the 3 leaves B has there); "
                             "7 leaves in 3 steps, all bits equal")
    from cublas_det.testing import assert_runs_identical

    with pytest.raises(AssertionError, match=r"^Runs are identical only as far as A goes: A ends at step 2"):
        assert_runs_identical(tmp_path / "a", tmp_path / "b")
    # a bad line that is not the last is an error, as before
    (tmp_path / "a" / "trace.jsonl").write_text(full[0][:25] + "\n" + full[1] + "\n")
    code, _, line = _error_line(capsys, tmp_path / "a", tmp_path / "b")
    assert code == 2 and "trace.jsonl:1: malformed JSON line" in line


def test_steps_present_only_in_run_b(tmp_path, capsys):
    """A gap in A (step 1 missing) is a divergence; steps after A's last one are A ending early."""
    a = _npy_run(tmp_path / "a", {0: {"w": np.ones(2, np.float32)}, 2: {"w": np.ones(2, np.float32)}})
    b = _npy_run(tmp_path / "b", {step: {"w": np.ones(2, np.float32)} for step in range(5)})
    code, out, _ = _main(capsys, a, b, "--all")
    assert code == 1
    assert out.splitlines()[-1] == "first divergence at step 1 in leaf w (missing in A); all of step 0 equal"
    assert "A ends at step 2; B goes on to step 4 (2 steps more, not compared)" in out
    code, out, _ = _main(capsys, _npy_run(tmp_path / "c", {0: {"w": np.ones(2, np.float32)}}), b)
    assert code == 0 and _verdict(out) == ("identical as far as A goes: A ends at step 0; B goes on to step 4 (4 steps "
                                           "more, not compared); 1 leaf in 1 step, all bits equal")
    # the steps B has beyond A come first: in the answer's first line, before any table
    assert out.splitlines()[2] == ("no divergence as far as A goes: A ends at step 0; B goes on to step 4 (4 steps "
                                   "more, not compared)")
    assert max(map(len, out.splitlines()[2:])) <= 100


def test_a_late_json_failure_keeps_the_exit_code_of_a_divergence(seed_runs, tmp_path, capsys):
    """--json on a full disk: the divergence still exits 1, and the message says what was not written."""
    code, out, err = _main(capsys, *seed_runs, "--json", "/dev/full")
    assert code == 1 and out.splitlines()[-1].startswith("first divergence at step 2")
    assert err.strip() == f"{prog_name()}: error: could not write /dev/full: No space left on device"
    a = seed_runs[0]
    code, out, err = _main(capsys, a, a, "--json", "/dev/full")
    assert code == 2 and out.splitlines()[-1].startswith("identical: ")  # identical, but the file is not there


@pytest.mark.parametrize("file", ["../../../etc/hostname", "/etc/hostname", "step_0/../../x.bin", "C:/x.bin", 7])
def test_a_trace_log_file_stays_inside_its_run(tmp_path, capsys, file):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "trace.jsonl").write_text(_log_line(0, "x", file=file) + "\n")
    code, _, line = _error_line(capsys, tmp_path / "a", tmp_path / "a")
    assert code == 2 and "trace.jsonl:1: file: expected a path inside the run directory" in line and repr(file) in line


def test_plus_zero_against_a_tiny_nonzero_value_is_not_a_signed_zero(tmp_path, capsys):
    """+0 against the smallest subnormal: 1 ULP, a real difference; only +0 against -0 is a signed zero."""
    a = _npy_run(tmp_path / "a", {0: {"z": np.zeros(3, np.float32)}})
    tiny = np.zeros(3, np.float32)
    tiny[1] = np.float32(1e-45)
    tiny[2] = np.float32(-0.0)
    b = _npy_run(tmp_path / "b", {0: {"z": tiny}})
    code, out, _ = _main(capsys, a, b)
    row = next(line for line in out.splitlines() if line.strip().startswith("z "))
    assert code == 1 and "2/3" in row and row.split()[4] == "1" and "1 signed zero" in row
    assert "signed zero only" not in row and "A 0.0, B 1e-45" in row


@pytest.mark.parametrize("kind", ["npy", "safetensors", "npz", "log"])
def test_a_tensor_file_longer_than_its_dtype_and_shape_say_is_refused(tmp_path, capsys, kind):
    """The bytes past what the header says would never be compared: two such files read 'identical'."""
    run = tmp_path / "a"
    (run / "step_0").mkdir(parents=True)
    values = np.ones(4, np.float32)
    if kind == "npy":
        np.save(run / "step_0" / "x.npy", values)
        with open(run / "step_0" / "x.npy", "ab") as stream:
            stream.write(b"\0" * 8)
    elif kind == "safetensors":
        write_safetensors(run / "step_0.safetensors", {"x": values})
        with open(run / "step_0.safetensors", "ab") as stream:
            stream.write(b"\0" * 8)
    elif kind == "npz":
        import zipfile

        with zipfile.ZipFile(run / "step_0.npz", "w") as archive, archive.open("x.npy", "w") as member:
            np.save(member, values)
            member.write(b"\0" * 8)
    else:
        (run / "step_0" / "x.bin").write_bytes(values.tobytes() + b"\0" * 8)
        (run / "trace.jsonl").write_text(json.dumps({"step": 0, "leaf": "x", "dtype": "float32", "shape": [4],
                                                     "digest": "0" * 32, "file": "step_0/x.bin"}) + "\n")
    code, _, line = _error_line(capsys, run, run)
    assert code == 2 and "longer than its" in line, line


def test_float32_dumps_read_as_bfloat16_give_one_warning_line_not_numpy_s(tmp_path, capsys):
    """--dtype bfloat16 on float32 dumps printed numpy's RuntimeWarning (a NaN pattern widened); now one line."""
    bits = np.full(64, 0x3F807F81, np.uint32)  # float32 1.0039...: its low half a signalling-NaN bfloat16
    for name, run in (("a", bits), ("b", bits + 1)):  # another NaN payload in B
        (tmp_path / name).mkdir()
        run.tofile(tmp_path / name / "step0_w.bin")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's warning would fail the call
        code, out, err = _main(capsys, tmp_path / "a", tmp_path / "b", "--dtype", "bfloat16")
    assert code == 1 and "RuntimeWarning" not in err
    (line,) = err.strip().splitlines()
    assert line.endswith(": warning: --dtype bfloat16: 64 mismatched elements read as NaN: is it the files' dtype?")
    code, out, err = _main(capsys, tmp_path / "a", tmp_path / "b")
    assert code == 1 and err == ""  # as float32: no NaN, no warning


def test_help_is_plain_text_and_names_the_program_as_typed(typed):
    for module in ("cublas_det.diff", "cublas_det.report", "cublas_det.compare"):
        text = typed(f"python -m {module}", "--help").stdout
        assert "``" not in text and ":func:" not in text and ":class:" not in text
        assert text.count(f"{PROG.split(' -m ')[0]} -m {module} ") >= 2  # the usage line and the examples
        assert max(map(len, text.splitlines())) <= 100
    text = typed("cublas-det diff", "--help").stdout
    assert "\n  cublas-det diff runs/a runs/b" in text and "python -m" not in text
    assert "0  identical in every step both runs have; a run that ends before the other is said first" in text
