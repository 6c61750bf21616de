import os
import re
import subprocess
import sys

import pytest

from .conftest import needs_no_gpu, unwrapped


def _run(*args, env=None):
    return subprocess.run([sys.executable, "-m", "cublas_det", *args], capture_output=True, text=True,
                          timeout=300, env=env, check=False)


@needs_no_gpu
def test_without_gpu_one_line_and_exit_2(typed):
    result = typed("python -m cublas_det", "env")
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    prog = f"{os.path.basename(sys.executable)} -m cublas_det env"  # the name the user typed
    assert lines[0].startswith(f"{prog}: error: no GPU available: ")


def test_help_exits_0(typed):
    result = typed("python -m cublas_det", "--help")
    assert result.returncode == 0 and "fingerprint" in result.stdout


@pytest.mark.gpu
def test_prints_fingerprint_and_each_mode_read_back():
    import os

    env = {k: v for k, v in os.environ.items() if k != "CUBLAS_DET_MATH_MODE"}
    result = _run("env", env=env)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    for field in ("GPU", "compute capability", "SMs", "driver_version", "runtime_version",
                  "cublas_version", "cublas_library", "cupy_version"):
        assert field in out
    for mode in ("PEDANTIC", "DEFAULT", "TF32"):  # each handle's mode, read back (columns as words.table sets them)
        assert re.search(rf"^  {mode} +-> {mode}$", out, re.MULTILINE), out
    assert "create_handle() with no argument -> PEDANTIC (from default)" in out


@pytest.mark.gpu
def test_bad_env_value_is_one_line_exit_2():
    import os

    result = _run("env", env={**os.environ, "CUBLAS_DET_MATH_MODE": "fastest"})
    assert result.returncode == 2
    assert unwrapped(result.stderr).strip().count("\n") == 0, result.stderr  # one message, wrapped to 100 columns
    assert "CUBLAS_DET_MATH_MODE='fastest'" in result.stderr
