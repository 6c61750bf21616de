"""The package's outputs, byte for byte, on a golden set: reports, compare, capture files and their report,
a lock file, its rendering and the interposer's table, and a diff of two training runs. The files under
tests/golden/ were written by the code before the house was rebuilt around one GEMM record; a change of
structure must not change a byte of what a user reads or stores. CUBLAS_DET_WRITE_GOLDEN=1 writes them anew
(after a change of output that is meant)."""

import os
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest

from cublas_det import GemmConfig, MathMode

HERE = pathlib.Path(__file__).resolve().parent
DATA, GOLDEN = HERE / "data", HERE / "golden"
LOGS = ("block", "block_bias", "block_fp32", "misc", "streams_one", "streams_per_stream")
ALGO = {"algo_id": 66, "tile": 24, "splitk": 1, "reduction_scheme": 0, "cta_swizzling": 0, "custom_option": 7,
        "stages": 35, "inner_shape": 0, "cluster_shape": 5}
WHERE = {"gpu": "NVIDIA H200", "sm_count": 132, "compute_capability": "9.0", "cublas_version": "13.1.0",
         "driver_version": "13.0"}


def _cli(*args, cwd):
    env = dict(os.environ, COLUMNS="100", NO_COLOR="1")
    done = subprocess.run([sys.executable, "-m", "cublas_det", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True)
    return f"exit {done.returncode}\n--- stdout\n{done.stdout}--- stderr\n{done.stderr}"


def _copied(tmp, *paths):
    """The files' names, copied into ``tmp``: what is written or printed holds no path of this checkout."""
    for path in paths:
        shutil.copyfile(path, tmp / path.name)
    return [path.name for path in paths]


def _capture(name, tmp):
    logs = _copied(tmp, *(DATA / "capture" / f"{name}.{lib}.log.gz" for lib in ("cublas", "cublaslt")))
    text = _cli("capture", "--out", "capture.json", "--from", *logs, cwd=tmp)
    return {f"capture_{name}.txt": text, f"capture_{name}.json": (tmp / "capture.json").read_text()}


def _reports(tmp):
    out, (run, identity) = {}, _copied(tmp, DATA / "h200_run.json", DATA / "h200_run_identity.json")
    for name in (run, identity):
        out[f"report_{name[:-5]}.txt"] = _cli("report", name, "--markdown", "run.md", cwd=tmp)
        out[f"report_{name[:-5]}.md"] = (tmp / "run.md").read_text()
    out["compare.txt"] = _cli("compare", run, identity, cwd=tmp)
    out["compare_fleet.txt"] = _cli("compare", run, identity, run, cwd=tmp)
    return out


def _lock(tmp):
    from cublas_det.lock.interposer import write_table
    from cublas_det.render.prescribe import render_lock
    from cublas_det.core.shapes import parse_shape
    from cublas_det.lock import file as lockfile

    def entry(spec, epilogue="", dtype="bfloat16", mode=MathMode.DEFAULT):
        config = GemmConfig(mode, input_dtype=dtype, output_dtype=dtype, api="lt", lt_algo=ALGO,
                            lt_epilogue=epilogue)
        shape = parse_shape(spec)
        return lockfile.LockEntry(lockfile.GemmKey.of(shape, config), config,
                                  {"m": shape.m, "rows": [1, 2, 4], "sm_count_targets": [16, 66], "streams": 4},
                                  {"against_heuristic": {"median": 1.0, "ci_low": 0.99, "ci_high": 1.01}}, spec)

    # the lock's path as given, relative to the test's folder, so that its report wraps alike anywhere
    path = "lock.json"
    lock = lockfile.Lock(WHERE, {}, path).merged([
        entry("16384x3352x768:tn"), entry("16384x768x3352:nn"), entry("16384x3352x768:tn", epilogue="BIAS"),
        entry("8192x512x256:nt", dtype="float32", mode=MathMode.TF32), entry("64x256x384:tn", dtype="float32")])
    lockfile.write(lock, path)
    keys = write_table(lockfile.load(path), str(tmp / "table.txt"))
    table = (tmp / "table.txt").read_text().replace(os.path.abspath(path), "LOCK")
    return {"lock.json": pathlib.Path(path).read_text(),
            "lock_render.txt": render_lock(lock, list(lock.entries.values()), ["Mx1x1:nn bf16: bits changed"]) + "\n",
            "lock_table.txt": table + "".join(f"{k}\n" for k in keys)}


def _diff(tmp):
    from cublas_det.trace import Recorder
    rng = np.random.default_rng(7)
    weights = [rng.standard_normal((16, 8)).astype(np.float32) for _ in range(4)]
    for run, nudge in (("a", 0.0), ("b", 1e-6)):
        with Recorder(str(tmp / run)) as rec:
            for step, w in enumerate(weights):
                rec.record(step, "dW1", w + (nudge if step >= 2 else 0.0))
                rec.record(step, "loss", np.float32(w.sum()))
    return {"diff.txt": _cli("diff", "a", "b", cwd=tmp)}


CASES = {"capture_" + name: (lambda tmp, name=name: _capture(name, tmp)) for name in LOGS}
CASES.update(reports=_reports, lock=_lock, diff=_diff)


@pytest.mark.parametrize("case", sorted(CASES))
def test_outputs_are_byte_identical_to_the_golden_set(case, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    outputs = CASES[case](tmp_path)
    if os.environ.get("CUBLAS_DET_WRITE_GOLDEN"):
        GOLDEN.mkdir(exist_ok=True)
        for name, text in outputs.items():
            (GOLDEN / name).write_text(text)
    for name, text in outputs.items():
        assert text == (GOLDEN / name).read_text(), f"{name} changed"


def test_the_golden_check_catches_a_changed_byte(tmp_path):
    outputs = _reports(tmp_path)
    name, text = next(iter(outputs.items()))
    assert text.replace("H200", "H100", 1) != (GOLDEN / name).read_text()
