"""The lock in a process that ``cublas-det run`` started, entered once the program imports torch (the process
was counted as the import began, see :func:`cublas_det.enter.count_process`): enabled, its report written at exit
(``PID.json``); a forked child is its own process, counted from zero. Nothing is printed into the program's
output."""

from __future__ import annotations

import atexit
import os
from multiprocessing import util

from ..enter import count_process
from ..store.lock import LOCK_ENV, REPORT_ENV
from . import disable, enable


def start() -> None:
    """Enable the lock ``CUBLAS_DET_LOCK`` names (``run`` checked it: no CUDA is touched, so a program may
    still fork workers), and write this process's report at exit."""
    router = enable(os.environ[LOCK_ENV], check=False)
    folder = os.environ.get(REPORT_ENV)
    if folder:
        atexit.register(_finish, folder, os.getpid())
        os.register_at_fork(after_in_child=lambda: _forked(router, folder))


def _forked(router, folder: str) -> None:
    """In a forked child: its own counts, its own report (multiprocessing's children end by os._exit, after
    its finalizers)."""
    router.reset_counts()
    count_process()
    util.Finalize(None, _finish, (folder, os.getpid()), exitpriority=0)


def _finish(folder: str, pid: int) -> None:
    if pid != os.getpid():  # the parent's atexit in a forked child: the child's own finalizer writes
        return
    report = disable()
    if report is not None:
        try:
            report.write(folder)
        except OSError:  # the program removed the folder: run says so
            pass
