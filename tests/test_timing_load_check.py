"""bench/timing_load_check.py on the CPU: which printed lines are timing warnings, and one line, exit 2, without a GPU."""

import pathlib

import pytest

from .conftest import load_bench_script, needs_no_gpu

ROOT = pathlib.Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "bench" / "timing_load_check.py"


@pytest.fixture
def check():
    return load_bench_script("timing_load_check.py")


def test_reads_the_printed_warnings_and_picks_the_timing_ones(check):
    stdout = ("Summary\n  trunk/W_in/dW: TF32 is 1.21x faster\nWarnings\n"
              "  CUPY_TF32=1 is set: cupy.matmul uses TF32 whatever the math mode\n"
              "  another process used the GPU while timing ran: pid 7 (python3) 1.0 GiB\n"
              "  trunk/W_a/dX DEFAULT: noisy timing, IQR 14% of the median\n")
    stderr = ("[###] 3/15 1.0s timing: visit 3 done, 15 of 15 shapes go on\n"
              "cublas_det: note: nvidia-ml-py is not installed: ...\n")
    printed = check.printed_warnings(stdout, stderr)
    assert printed == ["CUPY_TF32=1 is set: cupy.matmul uses TF32 whatever the math mode",
                       "another process used the GPU while timing ran: pid 7 (python3) 1.0 GiB",
                       "trunk/W_a/dX DEFAULT: noisy timing, IQR 14% of the median",
                       "cublas_det: note: nvidia-ml-py is not installed: ..."]
    assert check.timing_warnings(printed) == printed[1:3]  # not the env warning, not the note
    assert check.printed_warnings("Summary\n  all fine\n", "") == []


@needs_no_gpu
def test_without_gpu_one_line_exit_2(typed):
    result = typed("bench/timing_load_check.py")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.strip().count("\n") == 0
    assert result.stderr.startswith("timing_load_check.py: error: no GPU available: ")
