"""cublas-det audit without a GPU: the target and --batch refused in one line before anything runs, the
user's own errors shown as theirs (exit 2), and the verdict: exit 1 only for an op named, 2 when nothing
was compared. The audit itself (PyTorch on a GPU) is tests/test_torch_lock.py's."""

import importlib.util
import os
import pathlib
import sys

import pytest

from cublas_det.cli import audit
from cublas_det.errors import ExitCode

PROG = "cublas-det audit"
HAS_TORCH = importlib.util.find_spec("torch") is not None


def _audit(capsys, *argv):
    code = audit.main(list(argv), prog=PROG)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def step_file(tmp_path, monkeypatch):
    """Write a step file; the audited module and its folder on sys.path are undone afterwards."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    yield lambda text, name="step.py": _write(tmp_path / name, text)
    sys.modules.pop("cublas_det_audited", None)


def _write(path: pathlib.Path, text: str) -> str:
    path.write_text(text)
    return str(path)


# -- the target and --batch: refused before anything runs (torch or not) ---------------------------

def _fifo(tmp_path):
    os.mkfifo(tmp_path / "pipe.py")
    return "pipe.py"


@pytest.mark.parametrize("make, fragment", [
    (lambda tmp: "missing.py", "missing.py: no such file"),
    (lambda tmp: (tmp / "folder.py").mkdir() or "folder.py", "folder.py: is a directory, not a file"),
    (_fifo, "pipe.py: is a FIFO (named pipe), not a file"),
    (lambda tmp: _write(tmp / "step.txt", "def f(n): pass\n") and "step.txt", "step.txt: not a .py file"),
])
def test_a_bad_target_is_one_line_before_torch_is_needed(capsys, tmp_path, make, fragment):
    name = make(tmp_path)
    code, out, err = _audit(capsys, f"{tmp_path / name}:step")
    assert code == ExitCode.USAGE and not out
    assert err.count("\n") == 1 and fragment in err and "torch" not in err, err
    assert "give the Python file that defines step" in err


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_an_unreadable_target_is_one_line(capsys, step_file):
    path = step_file("def step(n): pass\n")
    os.chmod(path, 0)
    code, _, err = _audit(capsys, f"{path}:step")
    assert code == ExitCode.USAGE and err.count("\n") == 1 and "cannot be read (Permission denied)" in err, err


@pytest.mark.parametrize("batch", ["1", str(10 ** 12), str(audit.MAX_BATCH + 1)])
def test_batch_out_of_bounds_is_one_line_naming_the_bound(capsys, step_file, batch):
    code, out, err = _audit(capsys, f"{step_file('def step(n): pass')}:step", "--batch", batch)
    assert code == ExitCode.USAGE and not out and err.count("\n") == 1, err
    assert f"--batch {batch}: give 2 to {audit.MAX_BATCH:,}" in err


@pytest.mark.skipif(HAS_TORCH, reason="checks the path without PyTorch")
def test_without_torch_a_good_target_asks_for_torch(capsys, step_file):
    code, _, err = _audit(capsys, f"{step_file('def step(n): pass')}:step")
    assert code == ExitCode.USAGE and "No module named 'torch'" in err and "install it" in err, err
