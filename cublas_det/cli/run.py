"""cublas-det run: a program run with the lock applied, the program unchanged, whatever its language.

Every process of the command gets the lock's GEMMs through their pinned cuBLASLt algorithms: a PyTorch
process in CUDA mm, addmm, bmm, baddbmm (forward and backward); any other (C, C++, Rust, CuPy) in
cuBLAS's cublasGemmEx, cublasGemmStridedBatchedEx, cublasSgemm_v2, cublasSgemmStridedBatched (and _64
forms) and its own cublasLtMatmul on column-major matrices, through a preloaded interposer built by the
system C compiler on first use. Any other GEMM runs as it would (JAX's: XLA lays its matrices out
otherwise). At the end: how many calls were locked, which GEMMs fell through, and the command that adds
them.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile

from ..base.enter import entry_failures, python_env, run_program
from ..base.errors import ExitCode, UsageError
from ..lock import interposer
from ..lock import file as lockfile
from ..lock.file import LOCK_ENV, REPORT_ENV, LockReport
from ..base.words import plural
from .common import command_main, describe, exit_codes, warning_line

EPILOG = """examples:
  cublas-det prescribe --lock lock.json --capture capture.json   # make the lock
  %(prog)s --lock lock.json -- python train.py --steps 100
  %(prog)s --lock lock.json -- torchrun --nproc-per-node 8 train.py
  %(prog)s --lock lock.json -- ./target/release/trainer        # Rust (cudarc), C, C++ ...

""" + exit_codes("the command's own exit code is passed on (128 + N when signal N ended it); 2 also for a "
                 "lock that cannot be read or was written on another GPU or cuBLAS, and for a program that is "
                 "not Python where no C compiler builds the interposer")


def add_arguments(parser) -> None:
    describe(parser, __doc__, EPILOG, usage="%(prog)s --lock FILE [--quiet] -- CMD [ARGS...]")
    parser.add_argument("--lock", required=True, metavar="FILE", help="the lock that prescribe --lock wrote")
    parser.add_argument("--quiet", action="store_true", help="print no report (a GEMM that fell through still warns)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command to run, after --")


def run(args, parser) -> int:
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        raise UsageError("give the command to run after --, e.g. -- python train.py")
    lock = lockfile.load(args.lock)
    lock.check_here()
    try:
        preload = interposer.build()
    except interposer.NoCompiler as err:
        if not _python(command[0]):
            raise
        preload = None
        warning_line(parser.prog, f"only PyTorch's GEMMs are locked: {err}")
    keys = []
    folder = tempfile.mkdtemp(prefix="cublas-det-run-")
    log = os.path.join(folder, "enter.log")
    try:
        settings = {LOCK_ENV: os.path.abspath(args.lock), REPORT_ENV: folder}
        if preload:
            table = os.path.join(folder, "table.txt")
            keys = interposer.write_table(lock, table)
            settings.update({interposer.TABLE_ENV: table,
                             "LD_PRELOAD": " ".join(filter(None, (preload, os.environ.get("LD_PRELOAD"))))})
        env = python_env(["cublas_det.lock.boot:start@torch"], settings, log=log, count=folder)
        try:
            status, interrupted = run_program(command, env)
        except OSError as err:
            raise UsageError(f"cannot run {command[0]!r}: {err.strerror or err}") from None
        for line in entry_failures(log):
            warning_line(parser.prog, line)
        _report(parser.prog, args, folder, status, keys)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return ExitCode.INTERRUPTED if interrupted else status


def _python(program: str) -> bool:
    """Whether ``program`` is a Python interpreter (``python``, ``python3.12``, ``torchrun`` is not)."""
    return os.path.basename(program).startswith("python")


def _report(prog: str, args, folder: str, status: int, keys: list) -> None:
    """What the processes that entered left in ``folder``; a program's own doing is said, never fatal."""
    try:
        names = os.listdir(folder)
        reports, unread = LockReport.read(folder)
        native, native_entered, native_unread = interposer.read_reports(folder, keys, args.lock)
    except OSError:  # gone, or made a file
        warning_line(prog, "the program removed the report folder: no calls can be counted")
        return
    entered = {name[:-len(".entered")] for name in names if name.endswith(".entered")}
    reported = {name[:-len(".json")] for name in names if LockReport.is_report(name)}
    failed = {name[:-len(".failed")]: _read_mark(os.path.join(folder, name)) for name in sorted(names)
              if name.endswith(".failed")}  # the lock raised as it started there: its GEMMs ran as torch's
    native_reported = {name[:-len(interposer.REPORT_SUFFIX)] for name in names
                       if name.endswith(interposer.REPORT_SUFFIX)}
    for line in unread + native_unread:
        warning_line(prog, f"a report could not be read ({line})")
    if not entered and not native_entered:
        warning_line(prog, f"locked nothing: signal {status - 128} ended the command before it ran a GEMM"
                     if status > 128 else "locked nothing: no process ran a cuBLAS GEMM or imported torch, or "
                                          "entering failed (above)")
        return
    if failed:
        warning_line(prog, f"the lock could not start in {plural(len(failed), 'process')}, "
                           f"{'whose' if len(failed) > 1 else 'its'} GEMMs ran unlocked: {next(iter(failed.values()))}")
    started = entered - set(failed)
    missing = len(started - reported) + len(native_entered - native_reported)
    if missing:
        warning_line(prog, f"{plural(missing, 'process')} left no report (killed, or os._exit): "
                           f"{'its' if missing == 1 else 'their'} calls are not counted")
    if not started and not native_entered:  # the lock was on nowhere: what it would have locked is not known
        return
    report = LockReport.merge(reports + native)
    if not args.quiet or report.fell_through or missing:
        print(f"{prog}: {plural(len(started | native_entered), 'process')}\n{report}", file=sys.stderr)


def _read_mark(path: str) -> str:
    """Why the lock could not start in a process (its ``PID.failed``), in one line."""
    try:
        with open(path, errors="replace") as mark:
            return " ".join(mark.read(1000).split()) or "no reason given"
    except OSError:
        return "its reason was lost"


build_parser, main = command_main(add_arguments, run)
