"""The lock in a process that ``cublas-det run`` started, entered once the program imports torch (the process
was counted as the import began, see :func:`cublas_det.base.enter.count_process`): enabled, its report written at exit
(``PID.json``); a forked child is its own process, counted from zero. Nothing is printed into the program's
output."""

from __future__ import annotations

import ctypes
import os

from ..base.enter import at_each_exit, count_process, failed
from .file import LOCK_ENV, REPORT_ENV
from .router import disable, enable


def start() -> None:
    """Enable the lock ``CUBLAS_DET_LOCK`` names (``run`` checked it: no CUDA is touched, so a program may
    still fork workers), and write this process's report at exit (and each forked child's, its own)."""
    router = enable(os.environ[LOCK_ENV], check=False)
    _stand_aside()
    folder = os.environ.get(REPORT_ENV)
    if folder:
        at_each_exit(lambda: _finish(folder), lambda: _forked(router))


def _forked(router) -> None:
    """In a forked child: its own counts, and the process counted."""
    router.forked()
    count_process()


def _finish(folder: str) -> None:
    """This process's report into ``folder``; whatever fails is said in run's log, never in the program."""
    try:
        report = disable()
        if report is not None:
            report.write(folder)
    except Exception as err:  # the program removed the folder, a cuBLASLt handle would not go ...
        failed("the lock's report", err)


def _stand_aside() -> None:
    """Tell the interposer ``run`` preloaded, if any, that this process's GEMMs are PyTorch's lock's: it leaves
    cuBLAS's entry points untouched here, so that no call is locked or counted twice."""
    stand_aside = getattr(ctypes.CDLL(None), "cublas_det_stand_aside", None)
    if stand_aside is not None:
        stand_aside()
