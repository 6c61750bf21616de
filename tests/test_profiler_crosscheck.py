"""bench/profiler_crosscheck.py on the CPU: one line and exit 2 without PyTorch, its tolerance, and
that it leaves the engine's own kernels out of the profiled span."""

import importlib.util
import pathlib
import sys

import pytest

from cublas_det.cli.common import run_guarded

from .conftest import load_bench_script, unwrapped

SCRIPT = pathlib.Path(__file__).resolve().parent.parent / "bench" / "profiler_crosscheck.py"


@pytest.fixture
def crosscheck():
    return load_bench_script("profiler_crosscheck.py")


def test_without_torch_one_line_exit_2_before_gpu_work(crosscheck, monkeypatch, capsys):
    monkeypatch.setattr(crosscheck, "require_gpu", lambda: None)  # as on a GPU host
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real_find_spec(name, *a))
    monkeypatch.setattr(sys, "argv", ["profiler_crosscheck.py"])
    monkeypatch.setattr(crosscheck, "profiled_us_per_gemm", lambda *a: pytest.fail("profiled without torch"))
    assert run_guarded("profiler_crosscheck.py", crosscheck.main) == 2
    err = unwrapped(capsys.readouterr().err).strip()
    assert err.count("\n") == 0 and err.startswith("profiler_crosscheck.py: error: ")
    assert "needs PyTorch" in err and "install it with pip" in err


def test_tolerance_and_own_kernels(crosscheck):
    assert crosscheck.within(1.06, 0.10) and crosscheck.within(0.91, 0.10)
    assert not crosscheck.within(1.101, 0.10)  # TF32 on 128x56x4096:nt before batches started from a held stream
    assert crosscheck.SHAPES == ["128x56x4096:nt", "4096x128x128:tn"]
    from cublas_det.timing import hold

    # The engine's blocking and clock-stamp kernels are left out of the span: the names are the source's.
    assert crosscheck.KERNEL_NAMES == hold.KERNEL_NAMES
    assert all(f"__global__ void {name}(" in hold._SOURCE for name in hold.KERNEL_NAMES)


def test_verdict_names_what_failed_and_sets_the_exit_code(crosscheck, capsys):
    assert crosscheck.verdict([], "kernel time and the profiler's", 0.02) == 0
    assert capsys.readouterr().out.strip() == "ok: kernel time and the profiler's agree within 2% for every shape and mode"
    assert crosscheck.verdict(["128x56x4096:nt TF32"], "graph time and span", 0.10) == 1
    assert "FAIL: graph time and span differ by more than 10% for 128x56x4096:nt TF32" in capsys.readouterr().out


def test_kernel_time_crosscheck_without_torch_is_one_line_and_exit_2(monkeypatch, capsys):
    kernels = load_bench_script("kernel_time_crosscheck.py")
    monkeypatch.setattr(kernels, "require_gpu", lambda: None)  # as on a GPU host
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real_find_spec(name, *a))
    monkeypatch.setattr(sys, "argv", ["kernel_time_crosscheck.py"])
    assert run_guarded("kernel_time_crosscheck.py", kernels.main) == 2
    err = unwrapped(capsys.readouterr().err).strip()
    assert err.count("\n") == 0 and "needs PyTorch" in err
