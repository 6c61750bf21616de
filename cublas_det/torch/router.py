"""The lock applied to PyTorch: CUDA ``aten::mm``, ``addmm``, ``bmm`` and ``baddbmm`` registered anew below
autograd (``torch.library``); a call the lock has runs its pinned cuBLASLt algorithm on torch's current
stream, any other the op's ``out=`` overload (torch's own kernel and bits), counted as fallen through."""

from __future__ import annotations

import collections
import ctypes
import dataclasses
import threading
import warnings

import torch

from .._cublas import STATUS_TEXT, CublasError
from ..call import gemm_ex_args
from ..config import LT_WORKSPACE_BYTES
from ..dtypes import GEMM_TYPES
from ..store.lock import GemmKey, Lock, LockReport
from ..handle import LtPath

DTYPES = {getattr(torch, name): name for name in GEMM_TYPES}  # torch.float32 -> float32 ...
ALIGNMENT_BYTES = 16  # what cuBLASLt's heuristic assumed of the pointers when it chose the algorithm
_ONE, _ZERO = ctypes.c_float(1.0), ctypes.c_float(0.0)  # alpha, beta: every locked call is D = op(A) op(B) (+ bias)
OPS = ("mm", "addmm", "bmm", "baddbmm")


def _layout(t: torch.Tensor):
    """``(transposed, leading dimension)`` of a matrix (or each of a batch) as cuBLAS reads it row-major, or
    None when its strides are neither (torch would copy it)."""
    rows, cols = t.shape[-2:]
    row_stride, col_stride = t.stride()[-2:]
    # A dimension of size 1 has no stride that matters (as torch's is_contiguous says): row-major first.
    if (col_stride == 1 or cols == 1) and (row_stride >= max(cols, 1) or rows == 1):
        return False, max(row_stride, cols) if rows == 1 else row_stride
    if (row_stride == 1 or rows == 1) and (col_stride >= max(rows, 1) or cols == 1):
        return True, max(col_stride, rows) if cols == 1 else col_stride
    return None


def _current_stream(device: int) -> int:
    """torch's current stream on ``device`` (the raw call where this torch has it: no Stream object)."""
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    return raw(device) if raw else torch.cuda.current_stream(device).cuda_stream


def _compute(dtype: str) -> str:
    """The compute type torch runs a GEMM of this element type with: TF32 where it allows it for float32."""
    if dtype == "float32" and torch.backends.cuda.matmul.allow_tf32:
        return "COMPUTE_32F_FAST_TF32"
    return "COMPUTE_32F"


@dataclasses.dataclass(frozen=True)
class Plan:
    """What the lock makes of one GEMM call: its key (None if none), the reason it falls through."""

    key: GemmKey | None  # for any M; the entry's own key once locked
    m: int = 0
    reason: str = ""  # empty: locked

    @property
    def locked(self) -> bool:
        return not self.reason


class Router:
    """The lock's GEMMs routed through cuBLASLt; :meth:`report` counts what was locked."""

    def __init__(self, lock: Lock):
        self.lock = lock
        self._paths: dict = {}  # GemmKey -> LtPath of its pinned configuration
        self._workspaces: dict = {}  # (device, stream) -> a torch tensor: one workspace per stream, as cuBLAS asks
        self._workspace_bytes = max([e.config.workspace_bytes or LT_WORKSPACE_BYTES for e in lock.entries.values()],
                                    default=LT_WORKSPACE_BYTES)
        self._locked = collections.Counter()
        self._fell: dict = {}
        self._count = threading.Lock()
        self._library = None

    # -- planning: shared with the audit, which asks of every GEMM whether the lock has it
    def plan(self, a, b, bias=None, alpha=1, beta=1) -> Plan:
        """What the lock does with ``op(a) @ op(b)`` (+ ``bias``), given as torch passes them to mm/bmm/addmm."""
        dtype = DTYPES.get(a.dtype)
        if dtype is None or b.dtype != a.dtype or not (a.is_cuda and b.is_cuda):
            return Plan(None, reason=f"{a.dtype} {a.device.type} operands (the lock has CUDA float32, bfloat16, "
                                     "float16)")
        # What torch's own kernel would refuse goes to it, so that it says why.
        if a.dim() != b.dim() or a.dim() not in (2, 3) or a.shape[-1] != b.shape[-2] or b.device != a.device or (
                bias is not None and bias.device != a.device):
            return Plan(None, reason="operands torch refuses or moves (shapes, devices)")
        batched = a.dim() == 3
        m, k = a.shape[-2:]
        n = b.shape[-1]
        batch = a.shape[0] if batched else 1
        layouts = (_layout(a), _layout(b))
        key = None
        if None not in layouts:
            key = GemmKey(dtype, dtype, _compute(dtype), layouts[0][0], layouts[1][0], n, k, batch,
                          "BIAS" if bias is not None else "")
        if bias is not None and (alpha != 1 or beta != 1 or bias.dim() != 1 or bias.dtype != a.dtype
                                 or not bias.is_contiguous() or bias.shape[0] != n):
            return Plan(key, m, "addmm with scalars or a bias that is not one vector of N (no epilogue does it)")
        if key is None:
            return Plan(None, m, "an operand whose strides cuBLAS cannot read (torch copies it)")
        if not (m and n and k):
            return Plan(key, m, "an empty GEMM")
        entry = self.lock.entry_for(key, m)
        if entry is None:
            return Plan(key, m, "not in the lock")
        if any(t.data_ptr() % ALIGNMENT_BYTES for t in (a, b) + ((bias,) if bias is not None else ())):
            return Plan(key, m, f"an operand not aligned to {ALIGNMENT_BYTES} bytes")
        if batched and (a.shape[0] != b.shape[0]):
            return Plan(key, m, "batches of two sizes")
        return Plan(entry.key, m)

    def _fall(self, plan: Plan, dtype) -> None:
        name = str(plan.key) if plan.key else "a GEMM"
        with self._count:
            item = self._fell.setdefault((name, plan.reason), {"calls": 0, "reason": plan.reason, "m": 0})
            item["calls"] += 1
            if plan.key is not None and plan.m > item["m"]:
                mode = "tf32" if plan.key.compute_type == "COMPUTE_32F_FAST_TF32" else "default"
                item.update(m=plan.m, spec=plan.key.spec.replace("M", str(plan.m), 1), dtype=dtype, mode=mode)

    def _once(self, cache: dict, key, make):
        """``cache[key]``, made once (``make()``) under the lock: a cuBLASLt path per device and GEMM, a
        workspace per stream."""
        value = cache.get(key)
        if value is None:
            with self._count:
                value = cache.get(key)
                if value is None:
                    value = cache[key] = make()
        return value

    def gemm(self, plan: Plan, a, b, bias=None):
        """Issue a locked GEMM (``plan.locked``) into a new tensor: ``(out, "")``, or ``(None, why)``
        where cuBLASLt refused it."""
        key = plan.key
        config = self.lock.entries[key].config
        (trans_a, lda), (trans_b, ldb) = _layout(a), _layout(b)
        m, k = a.shape[-2:]
        n = b.shape[-1]
        out = torch.empty((*a.shape[:-2], m, n), dtype=a.dtype, device=a.device)
        element = GEMM_TYPES[key.input_dtype].cuda
        args = gemm_ex_args(trans_a, trans_b, m, n, k, lda, ldb, a.data_ptr(), b.data_ptr(), out.data_ptr(),
                            ctypes.addressof(_ONE), ctypes.addressof(_ZERO), int(config.compute_type), element,
                            element)
        if key.batch > 1:  # cuBLAS's operand order: B, A, C
            args += (key.batch, b.stride(0), a.stride(0), out.stride(0))
        device = a.device.index if a.device.index is not None else torch.cuda.current_device()
        stream = _current_stream(device)
        try:
            with torch.cuda.device(device):  # a kernel registered from Python gets no device guard
                path = self._once(self._paths, (device, key), lambda: LtPath(config, 0, 0))
                bias_ptr = bias.data_ptr() if bias is not None else 0
                workspace = self._once(self._workspaces, (device, stream), lambda: torch.empty(
                    self._workspace_bytes, dtype=torch.uint8, device=torch.device("cuda", device)))
                path.issue(args, stream, bias_ptr=bias_ptr, workspace=(workspace.data_ptr(), self._workspace_bytes))
        except CublasError as err:  # the algorithm, verified on the rows up to its M, does not run this M
            status = STATUS_TEXT.get(err.status, (str(err.status),))[0]
            return None, f"the pinned algorithm does not run M = {m} ({status})"
        with self._count:
            self._locked[str(key)] += 1
        return out, ""

    def _route(self, a, b, bias=None, alpha=1, beta=1, fall=None):
        plan = self.plan(a, b, bias, alpha, beta)
        if plan.locked:
            out, why = self.gemm(plan, a, b, bias)
            if out is not None:
                return out
            plan = dataclasses.replace(plan, reason=why)
        self._fall(plan, DTYPES.get(a.dtype, str(a.dtype)))
        return fall()

    # -- the ops, as their schemas take them
    def _mm(self, a, b):
        return self._route(a, b, fall=lambda: torch.ops.aten.mm.out(a, b, out=a.new_empty((a.shape[0], b.shape[1]))))

    def _bmm(self, a, b):
        return self._route(a, b, fall=lambda: torch.ops.aten.bmm.out(
            a, b, out=a.new_empty((a.shape[0], a.shape[1], b.shape[2]))))

    def _addmm(self, bias, a, b, *, beta=1, alpha=1):
        return self._route(a, b, bias, alpha, beta, fall=lambda: torch.ops.aten.addmm.out(
            bias, a, b, beta=beta, alpha=alpha, out=a.new_empty((a.shape[0], b.shape[1]))))

    def _baddbmm(self, c, a, b, *, beta=1, alpha=1):
        def fall():
            return torch.ops.aten.baddbmm.out(c, a, b, beta=beta, alpha=alpha,
                                              out=a.new_empty((a.shape[0], a.shape[1], b.shape[2])))
        if beta == 0 and alpha == 1:  # c is ignored: a bmm
            return self._route(a, b, fall=fall)
        self._fall(Plan(self.plan(a, b).key, a.shape[1], "baddbmm that adds to its input"),
                   DTYPES.get(a.dtype, str(a.dtype)))
        return fall()

    def enable(self) -> None:
        if self._library is not None:
            return
        library = torch.library.Library("aten", "IMPL")
        with warnings.catch_warnings():  # "Overriding a previously registered kernel": that is the point
            warnings.simplefilter("ignore", UserWarning)
            for op, fn in zip(OPS, (self._mm, self._addmm, self._bmm, self._baddbmm)):
                library.impl(op, fn, "CUDA")
        self._library = library

    def disable(self) -> None:
        """Give the ops back to torch's own kernels; :meth:`enable` takes them again, descriptors kept."""
        if self._library is not None:
            self._library._destroy()
            self._library = None

    def close(self) -> None:
        """:meth:`disable`, and free the cuBLASLt handles and descriptors."""
        self.disable()
        for path in self._paths.values():
            with path._lock:  # no GEMM of another thread is using its descriptors
                pass
            path.close()
        self._paths.clear()
        self._workspaces.clear()

    def report(self) -> LockReport:
        with self._count:
            fell: dict = {}
            for (name, reason), item in self._fell.items():  # a GEMM that fell for two reasons: both said
                fell[f"{name} ({reason})" if name in fell else name] = dict(item)
            return LockReport(dict(self._locked), fell, self.lock.path)
