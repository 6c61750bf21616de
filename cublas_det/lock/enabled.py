"""The one lock a PyTorch process has enabled: :func:`enable`, :func:`disable`, the ``with`` block :func:`lock`,
and :func:`active`. Imported only where PyTorch is (the router needs it); ``cublas_det.torch`` is its face."""

from __future__ import annotations

import contextlib
import sys

from . import file as lockfile
from .file import LockReport
from .router import Router

_active: Router | None = None


def enable(lock: str | lockfile.Lock, *, check: bool = True) -> Router:
    """Route the lock's GEMMs (a lock file's path, or a Lock) through their pinned configurations until
    :func:`disable`; ``check``: refuse one written on another GPU, SM count or cuBLAS (LockMismatch)."""
    global _active
    if _active is not None:
        raise RuntimeError("a lock is already enabled; disable() it first")
    loaded = lockfile.load(lock) if isinstance(lock, str) else lock
    if check:
        loaded.check_here()
    router = Router(loaded)
    router.enable()
    _active = router
    return router


def disable() -> LockReport | None:
    """Give the GEMMs back to torch; the report of what was locked (None when no lock was enabled)."""
    global _active
    router, _active = _active, None
    if router is None:
        return None
    router.close()
    return router.report()


def active() -> Router | None:
    """The enabled lock's router, if any."""
    return _active


@contextlib.contextmanager
def lock(path: str | lockfile.Lock, *, report=sys.stderr):
    """:func:`enable` for the ``with`` block, then :func:`disable`; the report is printed to ``report`` (None:
    silence) and kept as the router's ``.last_report``."""
    router = enable(path)
    try:
        yield router
    finally:
        router.last_report = disable()
        if report is not None:
            print(f"cublas_det lock: {router.last_report}", file=report)
