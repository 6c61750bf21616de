"""The lock in a process that ``cublas-det run`` started: enabled at start, its report written at exit."""

from __future__ import annotations

import atexit
import os

from . import disable, enable

LOCK_ENV, REPORT_ENV = "CUBLAS_DET_LOCK", "CUBLAS_DET_LOCK_REPORT"


def start() -> None:
    """Enable the lock ``CUBLAS_DET_LOCK`` names (``run`` checked it: no CUDA is touched, so a program may
    still fork workers), and write the report at exit."""
    enable(os.environ[LOCK_ENV], check=False)
    atexit.register(_finish, os.environ.get(REPORT_ENV))


def _finish(folder: str | None) -> None:
    report = disable()
    if report is not None and folder:
        report.write(folder)
