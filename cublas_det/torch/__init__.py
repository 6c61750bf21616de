"""The lock applied to an unchanged PyTorch program (``with cdt.lock("lock.json"): ...``), and the audit
of a whole step (``cdt.audit(step, batch=4)``); see docs/lock.md. Needs PyTorch, as nothing else does."""

from __future__ import annotations

import contextlib
import sys

try:
    import torch  # noqa: F401  (every module here needs it: say so once, with the fix, not a traceback deep)
except ModuleNotFoundError as err:
    if err.name != "torch":
        raise
    raise ModuleNotFoundError("No module named 'torch'; install it for cublas_det.torch: pip install torch",
                              name="torch") from None

from ..store import lock as lockfile
from ..store.lock import LockReport
from .audit import AuditReport, audit as _audit
from .router import Router

__all__ = ["AuditReport", "LockReport", "Router", "active", "audit", "disable", "enable", "lock"]

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


def audit(step, batch: int = 4, **options) -> AuditReport:
    """:func:`cublas_det.torch.audit.audit` with the enabled lock, if any."""
    return _audit(step, batch, router=_active, **options)


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
