"""The lock applied to PyTorch: CUDA ``aten::mm``, ``addmm``, ``bmm``, ``baddbmm`` and their ``out=`` overloads
(what torch.compile's code calls) registered anew below autograd (``torch.library``). A call the lock has runs
its pinned cuBLASLt algorithm on torch's current stream; any other runs torch's own kernel (its bits), counted
as fallen through, with the reason. A repeated call costs one look-up of what it reads per call. The one lock a
process has enabled: :func:`enable`, :func:`disable`, the ``with`` block :func:`lock` and :func:`active`."""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import sys
import threading
import warnings

import torch

from ..bindings.cublas import STATUS_TEXT, CublasError
from ..base.dtypes import GEMM_TYPES
from ..core.key import TF32_COMPUTE, GemmKey
from ..core.plan import LtPlan, plan_for
from ..base.enter import after_import
from .file import Lock, LockReport, count_fall, load, named_falls

DTYPES = {getattr(torch, name): name for name in GEMM_TYPES}  # torch.float32 -> float32 ...
ALIGNMENT_BYTES = 256  # cuBLASLt's heuristic, which chose the pinned algorithm, assumes 256-byte aligned operands
_ONE, _ZERO = ctypes.c_float(1.0), ctypes.c_float(0.0)  # alpha, beta: every locked call is D = op(A) op(B) (+ bias)
_ONE_AT, _ZERO_AT = ctypes.addressof(_ONE), ctypes.addressof(_ZERO)
OPS = ("mm", "addmm", "bmm", "baddbmm")  # the GEMM ops the lock runs, each with its out= overload too
_CUDA = torch._C.DispatchKeySet(torch._C.DispatchKey.CUDA)
_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None) or (
    lambda device: torch.cuda.current_stream(device).cuda_stream)
_current_device = getattr(torch._C, "_cuda_getDevice", None) or torch.cuda.current_device  # absent without CUDA
_tf32 = getattr(torch._C, "_get_cublas_allow_tf32", None) or (lambda: torch.backends.cuda.matmul.allow_tf32)


# One workspace per device and stream, for the process's life: a CUDA graph that captured a locked GEMM holds
# its address and may replay after the lock is gone. Made on a thread of its own, so that no graph's memory pool
# takes it (torch.compile's CUDA graph trees warm up with the calling thread's allocations sent to theirs);
# under capture only the graph's own pool may be used.
_workspaces: dict = {}  # (device, stream) -> (address, bytes, what keeps it)
_outgrown: list = []  # workspaces a larger one replaced, kept all the same
_workspace_lock = threading.Lock()


def _workspace(device: int, stream: int, size: int) -> tuple[int, int]:
    with _workspace_lock:
        found = _workspaces.get((device, stream))
        if found is None or found[1] < size:
            made = []

            def allocate():
                try:
                    made.append(torch.empty(size, dtype=torch.uint8, device=torch.device("cuda", device)))
                except Exception as err:  # out of memory: raised in the caller's thread
                    made.append(err)

            with torch.cuda.device(device):
                if torch.cuda.is_current_stream_capturing():
                    allocate()
                else:
                    worker = threading.Thread(target=allocate)
                    worker.start()
                    worker.join()
            if isinstance(made[0], Exception):
                raise made[0]
            if found is not None:  # a larger one replaces it: it stays, as graphs may hold its address
                _outgrown.append(found)
            found = _workspaces[(device, stream)] = (made[0].data_ptr(), size, made[0])
        return found[0], found[1]


_watching = None  # the enabled router: told of each GEMM torch.compile gives a kernel other than cuBLAS's


def _watch_inductor() -> None:
    """Wrap Inductor's choice of a GEMM's kernel (once a process): one that is not an extern call of torch's
    own op (a Triton or CUTLASS template under max-autotune) never reaches the lock, so the report names it."""
    from torch._inductor import select_algorithm
    cache = select_algorithm.AlgorithmSelectorCache
    choose = cache.__call__

    def chosen(self, name, choices, input_nodes, layout, *args, **kwargs):
        node = choose(self, name, choices, input_nodes, layout, *args, **kwargs)
        if _watching is not None and name in OPS:
            kind = type(getattr(getattr(node, "data", None), "data", node)).__name__
            if "Extern" not in kind:
                _watching.compiled_elsewhere(name, layout, kind)
        return node

    cache.__call__ = chosen


def _layout(t: torch.Tensor):
    """``(transposed, leading dimension)`` of a matrix (or each of a batch) as cuBLAS reads it row-major, or
    None when its strides are neither (torch would copy it)."""
    rows, cols = t.shape[-2:]
    row_stride, col_stride = t.stride()[-2:]
    # A dimension of size 1 has no stride that matters (as torch's is_contiguous says): row-major first.
    if (col_stride == 1 or cols == 1) and (row_stride >= max(cols, 1) or rows == 1):
        return False, max(row_stride, cols, 1) if rows == 1 else row_stride
    if (row_stride == 1 or rows == 1) and (col_stride >= max(rows, 1) or cols == 1):
        return True, max(col_stride, rows, 1) if cols == 1 else col_stride
    return None


def _batch_stride(t: torch.Tensor) -> int:
    """The elements between a batch's matrices (0 for a matrix, or one shared by all as an expanded view has)."""
    return t.stride(0) if t.dim() == 3 else 0


def _one_row(bias: torch.Tensor, n: int) -> bool:
    """Whether ``bias`` is one vector of N added to every row: a vector, a row, or a row expanded (stride 0),
    as compiled code passes it."""
    if bias.dim() not in (1, 2) or bias.shape[-1] != n or (bias.stride(-1) != 1 and n > 1):
        return False
    return bias.dim() == 1 or bias.shape[0] == 1 or bias.stride(0) == 0


@dataclasses.dataclass(frozen=True)
class Plan:
    """What the lock makes of one GEMM call: its key (None if none), the reason it falls through."""

    key: GemmKey | None  # for any M; the entry's own key once locked
    m: int = 0
    reason: str = ""  # empty: locked

    @property
    def locked(self) -> bool:
        return not self.reason


class _Locked:
    """A call signature the lock runs: its cuBLASLt plan, the output's size, this stream's workspace."""

    __slots__ = ("key", "plan", "size", "workspace", "workspace_bytes", "calls")

    def __init__(self, key: GemmKey, plan: LtPlan, size: tuple, workspace: int, workspace_bytes: int):
        self.key, self.plan, self.size = key, plan, size
        self.workspace, self.workspace_bytes, self.calls = workspace, workspace_bytes, 0


class Router:
    """The lock's GEMMs routed through cuBLASLt; :meth:`report` counts what was locked."""

    def __init__(self, lock: Lock):
        self.lock = lock
        self._calls: dict = {}  # call signature -> _Locked, or the Plan of a call that falls through
        self._retired: dict = {}  # str(GemmKey) -> calls locked before close() forgot them
        self._workspace_bytes = lock.workspace_bytes
        self._fell: dict = {}
        self._count = threading.Lock()
        self._library = None
        self._native: dict = {}  # overload -> torch's own CUDA kernel

    # -- deciding: shared with the audit, which asks of every GEMM whether the lock has it
    def plan(self, a, b, bias=None, alpha=1, beta=1, out=None) -> Plan:
        """What the lock does with ``op(a) @ op(b)`` (+ ``bias``), given as torch passes them to mm/bmm/addmm."""
        dtype = DTYPES.get(a.dtype)
        if dtype is None or b.dtype != a.dtype or not (a.is_cuda and b.is_cuda):
            return Plan(None, reason=f"{a.dtype} {a.device.type} operands (the lock has CUDA float32, bfloat16, "
                                     "float16)")
        # What torch's own kernel would refuse goes to it, so that it says why.
        if a.dim() != b.dim() or a.dim() not in (2, 3) or a.shape[-1] != b.shape[-2] or b.device != a.device or (
                bias is not None and bias.device != a.device) or (a.dim() == 3 and a.shape[0] != b.shape[0]):
            return Plan(None, reason="operands torch refuses or moves (shapes, devices)")
        m, k = a.shape[-2:]
        n = b.shape[-1]
        layouts = (_layout(a), _layout(b))
        compute = TF32_COMPUTE if dtype == "float32" and _tf32() else "COMPUTE_32F"
        key = None
        if None not in layouts:  # one key for every batch count: the pinned algorithm is the per-matrix GEMM's
            key = GemmKey(dtype, dtype, compute, layouts[0][0], layouts[1][0], n, k, "BIAS" if bias is not None
                          else "")
        if bias is not None and (alpha != 1 or beta != 1 or bias.dtype != a.dtype or not _one_row(bias, n)):
            return Plan(key, m, "addmm with scalars or a bias that is not one vector of N (no epilogue does it)")
        if key is None:
            return Plan(None, m, "an operand whose strides cuBLAS cannot read (torch copies it)")
        if out is not None and (out.dtype != a.dtype or tuple(out.shape) != (*a.shape[:-2], m, n)
                                or (_layout(out) or (True,))[0]):
            return Plan(key, m, "an out= tensor torch must resize or that is not row-major")
        if not (m and n and k) or 0 in a.shape[:-2]:  # a batch of none too: cuBLAS has no GEMM of it
            return Plan(key, m, "an empty GEMM")
        entry = self.lock.entry_for(key, m)
        if entry is None:
            return Plan(key, m, "not in the lock")
        if any(t.data_ptr() % ALIGNMENT_BYTES for t in (a, b, bias, out) if t is not None):
            return Plan(key, m, f"an operand not aligned to {ALIGNMENT_BYTES} bytes")
        return Plan(entry.key, m)

    # -- the hot path: one look-up of what a call reads, then cuBLASLt
    def _gemm(self, op: str, a, b, bias=None, out=None, alpha=1, beta=1, c=None):
        device = a.get_device()
        stream = _raw_stream(device) if device >= 0 else 0
        a_ptr, b_ptr = a.data_ptr(), b.data_ptr()
        bias_ptr = bias.data_ptr() if bias is not None else 0
        signature = (a.shape, a.stride(), b.shape, b.stride(), a.dtype, b.dtype, device, b.get_device(), stream,
                     (a_ptr | b_ptr | bias_ptr | (out.data_ptr() if out is not None else 0)) % ALIGNMENT_BYTES == 0,
                     _tf32(), None if bias is None else (bias.shape, bias.stride(), bias.dtype, bias.get_device(),
                                                         alpha, beta),
                     None if out is None else (out.shape, out.stride(), out.dtype, out.get_device()))
        call = self._calls.get(signature)
        if call is None:
            call = self._resolve(signature, a, b, bias, out, alpha, beta, device, stream)
        if type(call) is _Locked:
            if out is None:
                out = a.new_empty(call.size)
            try:
                if _current_device() == device:
                    call.plan.run(_ONE_AT, a_ptr, b_ptr, _ZERO_AT, out.data_ptr(), call.workspace,
                                  call.workspace_bytes, stream, bias_ptr)
                else:  # a kernel registered from Python gets no device guard
                    with torch.cuda.device(device):
                        call.plan.run(_ONE_AT, a_ptr, b_ptr, _ZERO_AT, out.data_ptr(), call.workspace,
                                      call.workspace_bytes, stream, bias_ptr)
            except CublasError as err:  # the algorithm, verified on the rows up to its M, does not run this M
                status = STATUS_TEXT.get(err.status, (str(err.status),))[0]
                call = self._calls[signature] = Plan(call.key, a.shape[-2],
                                                     f"the pinned algorithm does not run M = {a.shape[-2]} ({status})")
            else:
                with self._count:
                    call.calls += 1
                return out
        self._fall(call)
        return self._torch(op, a, b, bias, out, alpha, beta, c)

    def _torch(self, op: str, a, b, bias, out, alpha, beta, c):
        """Torch's own kernel for ``op``, its arguments as the op's schema takes them (made only here: a locked
        call builds none)."""
        first = {"addmm": (bias,), "baddbmm": (c,)}.get(op.partition(".")[0], ())
        kwargs = {"beta": beta, "alpha": alpha} if first else {}
        if out is not None:
            kwargs["out"] = out
        return self._native[op].call_boxed(_CUDA, *first, a, b, **kwargs)

    def _resolve(self, signature, a, b, bias, out, alpha, beta, device, stream):
        """The call a new signature makes: a :class:`_Locked` with its plan made, or the Plan that falls through."""
        plan = self.plan(a, b, bias, alpha, beta, out)
        call = plan
        if plan.locked:
            lda, ldb = _layout(a)[1], _layout(b)[1]
            m, n = a.shape[-2], b.shape[-1]
            batch = a.shape[0] if a.dim() == 3 else 1
            ldd, d_stride = (n, m * n) if out is None else (_layout(out)[1], _batch_stride(out))
            strides = (_batch_stride(a), _batch_stride(b), d_stride) if batch > 1 else (0, 0, 0)
            definition = plan.key.at(m).laid_out(lda, ldb, ldd, batch, strides)
            with torch.cuda.device(device):
                made = plan_for(device, definition, self.lock.entries[plan.key].config.lt_algo)
            call = _Locked(plan.key, made, (*a.shape[:-2], m, n), *_workspace(device, stream, self._workspace_bytes))
        self._calls[signature] = call
        return call

    def compiled_elsewhere(self, op: str, layout, kind: str) -> None:
        """A GEMM torch.compile gave ``kind`` (a template), not cuBLAS: named in the report, never counted."""
        size = "x".join(str(d) for d in getattr(layout, "size", ()))
        name = f"{op} {size} {DTYPES.get(getattr(layout, 'dtype', None), getattr(layout, 'dtype', ''))}"
        with self._count:
            self._fell.setdefault((name, "compiled"), {"calls": 0, "m": 0, "compiled": True,
                                                       "reason": f"a template the lock cannot see ({kind})"})

    def _fall(self, plan: Plan) -> None:
        with self._count:
            count_fall(self._fell, plan.key, plan.m, plan.reason)

    def _baddbmm_any(self, op, c, a, b, beta, alpha, out):
        if beta == 0 and alpha == 1:  # c is ignored: a bmm
            return self._gemm(op, a, b, out=out, alpha=alpha, beta=beta, c=c)
        self._fall(Plan(self.plan(a, b).key, a.shape[1], "baddbmm that adds to its input"))
        return self._torch(op, a, b, None, out, alpha, beta, c)

    def enable(self) -> None:
        if self._library is not None:
            return
        if not hasattr(torch.library, "get_kernel"):
            raise RuntimeError(f"the lock needs PyTorch 2.9 or newer (torch.library.get_kernel); this is "
                               f"{torch.__version__}")
        kernels = {  # each op's kernel, its arguments as the op's schema takes them
            "mm": lambda a, b: self._gemm("mm", a, b),
            "mm.out": lambda a, b, *, out: self._gemm("mm.out", a, b, out=out),
            "addmm": lambda bias, a, b, *, beta=1, alpha=1: self._gemm("addmm", a, b, bias, None, alpha, beta),
            "addmm.out":
                lambda bias, a, b, *, beta=1, alpha=1, out: self._gemm("addmm.out", a, b, bias, out, alpha, beta),
            "bmm": lambda a, b: self._gemm("bmm", a, b),
            "bmm.out": lambda a, b, *, out: self._gemm("bmm.out", a, b, out=out),
            "baddbmm": lambda c, a, b, *, beta=1, alpha=1: self._baddbmm_any("baddbmm", c, a, b, beta, alpha, None),
            "baddbmm.out":
                lambda c, a, b, *, beta=1, alpha=1, out: self._baddbmm_any("baddbmm.out", c, a, b, beta, alpha, out)}
        self._native = {op: torch.library.get_kernel(f"aten::{op}", "CUDA") for op in kernels}
        global _watching
        _watching = self
        if not getattr(_watch_inductor, "installed", False):
            _watch_inductor.installed = True
            after_import("torch._inductor.select_algorithm", _watch_inductor)
        library = torch.library.Library("aten", "IMPL")
        with warnings.catch_warnings():  # "Overriding a previously registered kernel": that is the point
            warnings.simplefilter("ignore", UserWarning)
            for op, fn in kernels.items():
                library.impl(op, fn, "CUDA")
        self._library = library

    def disable(self) -> None:
        """Give the ops back to torch's own kernels; :meth:`enable` takes them again, its calls kept."""
        global _watching
        if _watching is self:
            _watching = None
        if self._library is not None:
            self._library._destroy()
            self._library = None

    def close(self) -> None:
        """:meth:`disable`, and forget its calls (the counts are kept for :meth:`report`; the plans are the
        process's)."""
        self.disable()
        with self._count:
            for call in self._calls.values():
                if type(call) is _Locked and call.calls:
                    self._retired[str(call.key)] = self._retired.get(str(call.key), 0) + call.calls
            self._calls.clear()

    def forked(self) -> None:
        """In a forked child: count from zero, and forget the parent's calls (their plans are not this process's:
        CUDA cannot run here if the parent had started it)."""
        self._count = threading.Lock()  # another thread of the parent may have held it at the fork
        self._calls, self._fell, self._retired = {}, {}, {}

    def report(self) -> LockReport:
        with self._count:
            locked = dict(self._retired)
            for call in self._calls.values():
                if type(call) is _Locked and call.calls:
                    name = str(call.key)
                    locked[name] = locked.get(name, 0) + call.calls
            return LockReport(locked, named_falls(self._fell), self.lock.path)


# The one lock a PyTorch process has enabled (``cublas_det.torch`` is its face).
_active: Router | None = None


def enable(lock: str | Lock, *, check: bool = True) -> Router:
    """Route the lock's GEMMs (a lock file's path, or a Lock) through their pinned configurations until
    :func:`disable`; ``check``: refuse one written on another GPU, SM count or cuBLAS (LockMismatch)."""
    global _active
    if _active is not None:
        raise RuntimeError("a lock is already enabled; disable() it first")
    loaded = load(lock) if isinstance(lock, str) else lock
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
def lock(path: str | Lock, *, report=sys.stderr):
    """:func:`enable` for the ``with`` block, then :func:`disable`; the report is printed to ``report`` (None:
    silence) and kept as the router's ``.last_report``."""
    router = enable(path)
    try:
        yield router
    finally:
        router.last_report = disable()
        if report is not None:
            print(f"cublas_det lock: {router.last_report}", file=report)
