"""The lock applied to an unchanged PyTorch program (``with cdt.lock("lock.json"): ...``), and the audit
of a whole step (``cdt.audit(step, batch=4)``); see docs/lock.md. Needs PyTorch, as nothing else does."""

from __future__ import annotations

try:
    import torch  # noqa: F401  (every module here needs it: say so once, with the fix, not a traceback deep)
except ModuleNotFoundError as err:
    if err.name != "torch":
        raise
    raise ModuleNotFoundError("No module named 'torch'; install it for cublas_det.torch: pip install torch",
                              name="torch") from None

from ..lock.file import LockReport
from ..lock.router import Router, active, disable, enable, lock
from .audit import AuditReport, audit as _audit

__all__ = ["AuditReport", "LockReport", "Router", "active", "audit", "disable", "enable", "lock"]


def audit(step, batch: int = 4, **options) -> AuditReport:
    """:func:`cublas_det.torch.audit.audit` with the enabled lock, if any."""
    return _audit(step, batch, router=active(), **options)
