"""cublas-det audit without a GPU: the target and --batch refused in one line before anything runs, the
user's own errors shown as theirs (exit 2), and the verdict: exit 1 only for an op named, 2 when nothing
was compared; the PyTorch setting named with an op that did not repeat (on the CPU, with PyTorch where it is
installed). The audit itself on a GPU is tests/test_torch_lock.py's."""

import importlib.util
import os
import pathlib
import sys
import types

import pytest

import cublas_det
from cublas_det.cli import audit
from cublas_det.lock.deterministic_ops import repeat_hint
from cublas_det.base.errors import ExitCode
from cublas_det.base.words import plural

from .conftest import unwrapped

PROG = "cublas-det audit"
HAS_TORCH = importlib.util.find_spec("torch") is not None


def _audit(capsys, *argv):
    code = audit.main(list(argv), prog=PROG)
    out, err = capsys.readouterr()
    err = unwrapped(err)
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


def _part(what, compared=3, first=None, note=""):
    return types.SimpleNamespace(what=what, compared=compared, skipped=0, first=first, note=note)


@pytest.fixture
def fake_torch(monkeypatch):
    """cublas_det.torch's face as the command uses it, its audit given by the test (PyTorch is not needed
    to run the user's file and step, or to judge a report)."""
    fake = types.SimpleNamespace(enable=lambda path: None, disable=lambda: None, audit=None)
    monkeypatch.setitem(sys.modules, "cublas_det.torch", fake)
    monkeypatch.setattr(cublas_det, "torch", fake, raising=False)
    return fake


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


def test_importing_cublas_det_torch_without_torch_is_one_line_naming_the_fix():
    """It was a traceback through audit.py, ending in No module named 'torch'."""
    import subprocess

    code = "import sys; sys.modules['torch'] = None; import cublas_det.torch"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and lines[-1] == ("ModuleNotFoundError: No module named 'torch'; install it for "
                                                    "cublas_det.torch: pip install torch"), result.stderr
    assert "audit.py" not in result.stderr  # raised where the package starts, not from a module inside it


@pytest.mark.parametrize("signature", ["()", "(n, m)", "(*, n)"])
def test_a_step_that_cannot_take_the_batch_is_one_usage_line(capsys, step_file, fake_torch, signature):
    """step() with no argument: our own TypeError traceback, exit 1."""
    fake_torch.audit = lambda step, batch, **options: step(batch)
    code, out, err = _audit(capsys, f"{step_file(f'def step{signature}: pass')}:step")
    assert code == ExitCode.USAGE and not out and err.count("\n") == 1, err
    assert f"error: step{signature} cannot be called as step(n); give a step that takes the batch size n" in err


# -- the user's errors: theirs, exit 2 ------------------------------------------------------------------

def _their_error(capsys, spec, fake_torch, audit_step=lambda step, batch, **options: step(batch)):
    fake_torch.audit = audit_step
    code, out, err = _audit(capsys, spec)
    assert code == ExitCode.USAGE and not out, err
    assert os.path.dirname(cublas_det.__file__) not in err, err  # none of our frames
    return err


def test_a_step_that_raises_shows_its_traceback_as_theirs(capsys, step_file, fake_torch):
    path = step_file("def helper(n):\n    return n / 0\n\n\ndef step(n):\n    return helper(n)\n")
    err = _their_error(capsys, f"{path}:step", fake_torch)
    lines = err.splitlines()
    assert lines[0] == f"{PROG}: error: step(n) raised; its traceback, from your code:", err
    assert lines[1] == "Traceback (most recent call last):"
    assert f'File "{path}", line 6, in step' in err and f'File "{path}", line 2, in helper' in err
    assert lines[-1] == "ZeroDivisionError: division by zero"


def test_a_syntax_error_in_the_file_is_theirs(capsys, step_file, fake_torch):
    path = step_file("def step(n):\n    return n +\n")
    err = _their_error(capsys, f"{path}:step", fake_torch)
    assert err.startswith(f"{PROG}: error: {path} raised as it was imported; its traceback, from your code:\n")
    assert f'File "{path}", line 2' in err and "SyntaxError: invalid syntax" in err, err


def test_an_import_error_in_the_file_is_theirs(capsys, step_file, fake_torch):
    path = step_file("import no_such_module_of_theirs\n\ndef step(n):\n    pass\n")
    err = _their_error(capsys, f"{path}:step", fake_torch)
    assert f'File "{path}", line 1, in <module>' in err and "import no_such_module_of_theirs" in err, err
    assert err.endswith("ModuleNotFoundError: No module named 'no_such_module_of_theirs'\n")


def test_a_step_that_exits_is_theirs(capsys, step_file, fake_torch):
    err = _their_error(capsys, f"{step_file('import sys' + chr(10) + 'def step(n): sys.exit(1)')}:step", fake_torch)
    assert "step(n) raised" in err and err.endswith("SystemExit: 1\n"), err


def test_a_bug_of_ours_keeps_its_traceback(capsys, step_file, fake_torch):
    fake_torch.audit = lambda step, batch, **options: plural(None, "op")  # raises inside cublas_det
    with pytest.raises(TypeError):
        _audit(capsys, f"{step_file('def step(n): pass')}:step")


def test_an_error_torch_raises_for_a_call_the_lock_hands_back_is_theirs():
    router = os.path.join(os.path.dirname(cublas_det.__file__), "lock", "router.py")
    line = next(n for n, text in enumerate(open(router), 1) if "call_boxed" in text)
    handed_back = compile("\n" * (line - 1) + "raise RuntimeError('mat1 and mat2 shapes cannot be multiplied')",
                          router, "exec")  # as torch's kernel raises it, under the router's fall-through line
    with pytest.raises(audit.TheirError, match="shapes cannot be multiplied"):
        audit.theirs("step(n)", exec, handed_back, {})
    ours = compile("\n" * 3 + "raise RuntimeError('a bug of ours')", router, "exec")
    with pytest.raises(RuntimeError, match="a bug of ours"):
        audit.theirs("step(n)", exec, ours, {})


# -- the verdict: 1 only for an op named, 2 when nothing was compared -------------------------------------

BATCH, REPEAT = "batch 1 vs 4, sample 0", "repeat at batch 4"


@pytest.mark.parametrize("batch, repeat, code, start", [
    (_part(BATCH), _part(REPEAT), ExitCode.OK, "Clean: every op batch-invariant and repeating"),
    (_part(BATCH), None, ExitCode.OK, "Clean: every op batch-invariant."),
    (_part(BATCH, first="aten.mm"), _part(REPEAT), ExitCode.FINDING, "Not clean: the op named first"),
    (_part(BATCH, 0, note="x"), _part(REPEAT, first="aten.mm"), ExitCode.FINDING, "Not clean: the op named first"),
    (_part(BATCH, 0, note="the step ran no op"), _part(REPEAT), ExitCode.USAGE,
     f"No verdict: nothing was compared in {BATCH}"),
    (_part(BATCH), _part(REPEAT, 0, note="x"), ExitCode.USAGE, f"No verdict: nothing was compared in {REPEAT}"),
    (_part(BATCH, note="the step ran other ops from op 3"), _part(REPEAT), ExitCode.USAGE,
     f"No verdict: {BATCH} stopped before the step's end"),
    (None, None, ExitCode.USAGE, "No verdict: nothing was compared"),
])
def test_the_verdict_names_an_op_or_exits_2(batch, repeat, code, start):
    got, line = audit.verdict(types.SimpleNamespace(batch=batch, repeat=repeat))
    assert got == code and line.startswith(start) and len(line) <= 100, line
    assert ("op named" in line) == (code == ExitCode.FINDING)


def test_a_step_that_compared_nothing_exits_2(capsys, step_file, fake_torch):
    class Report:
        batch, repeat = _part(BATCH, 0, note="the step ran no op with an output to compare"), None

        def __str__(self):
            return f"{self.batch.what}: nothing compared ({self.batch.note})"
    fake_torch.audit = lambda step, batch, **options: Report()
    code, out, err = _audit(capsys, f"{step_file('def step(n): pass')}:step", "--no-repeat")
    assert code == ExitCode.USAGE and not err, err
    assert out.splitlines()[-1].startswith(f"No verdict: nothing was compared in {BATCH}"), out
    assert "Not clean" not in out


# -- words ------------------------------------------------------------------------------------------------

def test_help_says_gradients_are_set_to_none_as_docs_lock_does():
    """The audit compares the ops two runs run: gradients zeroed in place add zero_ and add_ ops to a run
    that finds them, not to one that finds them None (a fresh model's first)."""
    words = " ".join(audit.build_parser(PROG).format_help().split())
    docs = " ".join((pathlib.Path(__file__).parent.parent / "docs" / "lock.md").read_text().split())
    assert "gradients set to None first" in words and "gradients set to None first" in docs
    assert "gradients zeroed" not in words


# -- what makes an op repeat: PyTorch's own setting, where it has one --------------------------------------

@pytest.mark.parametrize("op, documented", [
    ("aten.index_add.default", "torch.index_add"), ("aten.index_add_.default", "torch.index_add"),
    ("aten.scatter_add.default", "scatter_add_"), ("aten.scatter.src", "a Tensor src"),
    ("aten._index_put_impl_.default", "accumulate=False"), ("aten.convolution_backward.default", "Conv"),
])
def test_an_op_pytorch_makes_deterministic_is_named_with_the_setting(op, documented):
    hint = repeat_hint(op)
    assert hint.startswith("torch.use_deterministic_algorithms(True) makes it repeat") and documented in hint


@pytest.mark.parametrize("op", ["aten.mm.default", "aten.cumsum.default", "aten.scatter.value", "aten.sum.dim_IntList"])
def test_an_op_without_a_documented_setting_gets_no_hint(op):
    assert repeat_hint(op) == ""  # cumsum raises under the setting: refused, not made to repeat


@pytest.mark.skipif(not HAS_TORCH, reason="PyTorch is not installed")
@pytest.mark.parametrize("deterministic", [False, True])
def test_the_audit_names_the_setting_for_an_op_that_did_not_repeat(deterministic):
    import torch

    from cublas_det.torch.audit import audit as run_audit

    calls = iter(range(1, 5))  # each call's own alpha: index_add_ is the first op whose bits differ

    def step(n):
        torch.zeros(n, 4).index_add_(0, torch.arange(n), torch.ones(n, 4), alpha=next(calls))

    before = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(deterministic)
    try:
        report = run_audit(step, 2)
    finally:
        torch.use_deterministic_algorithms(before)
    assert report.batch.first.op == report.repeat.first.op == "aten.index_add_.default"
    assert not report.batch.hint  # no setting keeps an op's bits as the batch grows
    assert report.repeat.hint == ("" if deterministic else repeat_hint("aten.index_add_.default"))
    assert ("use_deterministic_algorithms" in str(report)) != deterministic
    assert all(len(line) <= 100 for line in report.lines())
