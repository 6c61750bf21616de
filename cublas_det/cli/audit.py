"""cublas-det audit: the first op of a PyTorch step whose bits depend on the batch or do not repeat.

FILE.py:FUNCTION names the step: FUNCTION(n) runs it on the first n samples (sample 0 the same for
every n), leaving the state it found (no optimizer step; gradients set to None first, so that every
run runs the same ops). It runs at batch 1 and at --batch, comparing sample 0's slice of every op's
output, and twice at --batch, comparing whole outputs; with --lock, its GEMMs run locked and each is
said to be locked or not. A module-level `model` in FILE names the modules ops ran in.
"""

from __future__ import annotations

import importlib.util
import inspect
import os
import sys
import traceback

from ..base.errors import ExitCode, UsageError
from ..base import files
from .common import EXPECTED_ERRORS, command_main, describe, error_line, exit_codes

MAX_BATCH = 1 << 16  # the step runs at --batch: past this, its outputs rarely fit
PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # frames of ours, not the user's
EPILOG = """examples:
  %(prog)s step.py:train_step --batch 4
  %(prog)s step.py:forward --batch 8 --lock lock.json --no-repeat

""" + exit_codes("1 when an op is not batch-invariant or does not repeat (named); 2 also when the step "
                 "or its file raised (their traceback shown)")


class TheirError(Exception):
    """The user's file or step raised: ``args`` are what raised, and the traceback of their code."""


def target(spec: str) -> tuple[str, str]:
    """The file and function ``FILE.py:FUNCTION`` names, the file checked to be a readable ``.py`` file."""
    path, _, name = spec.rpartition(":")
    if not path or not name:
        raise UsageError(f"{spec!r}: give FILE.py:FUNCTION, e.g. step.py:train_step")
    hint = f"give the Python file that defines {name}"
    files.open_regular(path, hint, error=UsageError).close()
    if not path.endswith(".py"):
        raise UsageError(f"{path}: not a .py file; {hint}")
    return path, name


def load_step(path: str, name: str):
    """The function ``name`` of the file ``path``, and the file's module-level ``model`` if it is one (or None)."""
    module_spec = importlib.util.spec_from_file_location("cublas_det_audited", path)
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[module_spec.name] = module  # as an imported module is (dataclasses, pickling look it up)
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))  # as `python FILE.py` would import its neighbours
    theirs(f"{path} raised as it was imported", module_spec.loader.exec_module, module)
    step = getattr(module, name, None)
    if not callable(step):
        raise UsageError(f"{path} defines no function {name!r}")
    try:  # the audit calls step(n): a step that cannot take n is the target's fault, not a bug of ours
        inspect.signature(step).bind(1)
    except TypeError:
        raise UsageError(f"{name}{inspect.signature(step)} cannot be called as {name}(n); give a step that "
                         "takes the batch size n") from None
    except ValueError:  # no signature to read (a builtin): called as it is
        pass
    model = getattr(module, "model", None)
    return step, model if hasattr(model, "named_modules") else None


def _ours(filename: str) -> bool:
    return os.path.abspath(filename).startswith(PACKAGE + os.sep)


def theirs(what: str, call, *args, **kwargs):
    """``call(*args, **kwargs)``, running the user's code: what it raises becomes :class:`TheirError`, with
    their frames only (not ours, not importlib's); our own error or bug, raised in our frame, stays ours."""
    try:
        return call(*args, **kwargs)
    except (Exception, SystemExit) as err:
        frames = traceback.extract_tb(err.__traceback__)
        # Ours: raised in our frame, but not where the lock hands a call it does not run to torch's own kernel.
        if isinstance(err, EXPECTED_ERRORS) or (frames and _ours(frames[-1].filename) and
                                               "call_boxed" not in (frames[-1].line or "")):
            raise
        frames = [f for f in frames if not (_ours(f.filename) or f.filename.startswith("<frozen importlib"))]
        head = ["Traceback (most recent call last):\n", *traceback.format_list(frames)] if frames else []
        text = "".join(head + traceback.format_exception_only(type(err), err))
        raise TheirError(what, text) from None


def verdict(report) -> tuple[ExitCode, str]:
    """The exit code and last line of an audit's ``report`` (its parts ``batch`` and ``repeat``, None where
    not run): 1 only for an op named, 0 when every part compared ops and all were identical, else 2."""
    parts = [(part, word) for part, word in ((report.batch, "batch-invariant"), (report.repeat, "repeating"))
             if part is not None]
    if any(part.first is not None for part, _ in parts):
        return ExitCode.FINDING, ("Not clean: the op named first is where the bits part (what follows differs "
                                  "through it).")
    for part, _ in parts:
        if not part.compared:
            return ExitCode.USAGE, f"No verdict: nothing was compared in {part.what} (why: above)."
        if part.note:
            return ExitCode.USAGE, f"No verdict: {part.what} stopped before the step's end (why: above)."
    if not parts:
        return ExitCode.USAGE, "No verdict: nothing was compared."
    return ExitCode.OK, f"Clean: every op {' and '.join(word for _, word in parts)}."


def add_arguments(parser) -> None:
    describe(parser, __doc__, EPILOG)
    parser.add_argument("step", metavar="FILE.py:FUNCTION", help="the step to audit")
    parser.add_argument("--batch", type=int, default=4,
                        help=f"the batch to compare with batch 1, 2 to {MAX_BATCH:,} (default: %(default)s)")
    parser.add_argument("--lock", metavar="FILE", help="run the step's GEMMs under this lock")
    parser.add_argument("--no-repeat", action="store_true", help="only batch 1 against --batch")


def run(args, parser) -> int:
    if not 2 <= args.batch <= MAX_BATCH:  # batch 1 is what it is compared with
        raise UsageError(f"--batch {args.batch}: give 2 to {MAX_BATCH:,}")
    path, name = target(args.step)
    import cublas_det.torch as locked  # PyTorch: imported only for this command, once the file is known
    if args.lock:
        locked.enable(args.lock)
    try:
        step, model = load_step(path, name)
        report = theirs(f"{name}(n) raised", locked.audit, step, args.batch, repeat=not args.no_repeat, model=model)
    except TheirError as err:
        what, their_traceback = err.args
        error_line(parser.prog, f"{what}; its traceback, from your code:")
        print(their_traceback, end="", file=sys.stderr)
        return ExitCode.USAGE
    finally:
        lock_report = locked.disable() if args.lock else None
    code, last = verdict(report)
    print(f"{report}\n{last}")
    if lock_report is not None:
        print(f"Lock: {lock_report}")
    return code


build_parser, main = command_main(add_arguments, run)
