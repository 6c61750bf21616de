"""The Handle that owns one cuBLAS handle, ``create_handle()``, per-thread default handles, ``math_mode()``.
With ``api="lt"`` a handle's GEMMs run as ``cublasLtMatmul`` (:class:`LtPath`), one plan per cuBLASLt
:class:`~.definition.GemmDefinition`."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import threading
import warnings
from ctypes import c_void_p

from ..bindings import cublas as _cublas
from ..bindings.cublas import AtomicsMode, ComputeType, MathMode
from .config import LT_WORKSPACE_BYTES, GemmConfig, ModeSource, math_mode_name, resolve_config
from .device import require_gpu, tf32_env_warnings
from ..base.dtypes import BY_CUDA_NAME, GEMM_TYPES
from ..base.integers import is_int
from .definition import GemmDefinition
from .key import GemmKey
from .plan import LtPlan, lt_handle, plan_for

_DEFINITIONS_HELD = 4096  # a handle's definitions of the GEMMs it issued, at most
_bias_vectors: dict = {}  # (device, length, type) -> the bias an epilogue adds when the caller gives none


def _bias(length: int, dtype: str) -> int:
    """A bias vector drawn once per device, length and type (seed 0): the same bits in every process."""
    import cupy
    key = (cupy.cuda.runtime.getDevice(), length, dtype)
    vector = _bias_vectors.get(key)
    if vector is None:
        values = cupy.random.default_rng(0).standard_normal(length, dtype=cupy.float32)
        vector = _bias_vectors[key] = values.astype(GEMM_TYPES[dtype].numpy_dtype)
    return vector.data.ptr


class LtPath:
    """``cublasLtMatmul`` for the GEMMs of one handle, with its configuration's options and workspace: the
    process's :class:`LtPlan` of each :class:`~.definition.GemmDefinition` (and SM-count target) it runs."""

    def __init__(self, config: GemmConfig, device: int, workspace_ptr: int, workspace_bytes: int):
        self.config, self.device = config, device
        self.workspace = (workspace_ptr, workspace_bytes)
        self._plans: dict = {}  # (definition, the call's SM-count target) -> the process's LtPlan: issue() asks

    def _plan(self, definition: GemmDefinition, sm_count_target: int) -> LtPlan:
        """The plan of ``definition`` at the smaller of the configuration's and the call's SM count targets."""
        plan = self._plans.get((definition, sm_count_target))
        if plan is None:
            targets = [t for t in (self.config.lt_sm_count_target, sm_count_target) if t]
            planned = dataclasses.replace(definition, sm_count_target=min(targets)) if targets else definition
            plan = self._plans.setdefault((definition, sm_count_target), plan_for(
                self.device, planned, self.config.lt_algo, self.workspace[1], self.config.lt_reduction_scheme_mask))
        return plan

    def issue(self, definition: GemmDefinition, pointers: tuple, stream_ptr: int, sm_count_target: int = 0,
              bias_ptr: int = 0, workspace: tuple | None = None) -> None:
        """Run ``definition`` on ``pointers`` (alpha's and beta's host addresses, a, b, d: ``(alpha, a, b, beta,
        d)``) on ``stream_ptr`` (``workspace``: in place of the path's)."""
        plan = self._plan(definition, sm_count_target)
        if not bias_ptr and definition.epilogue == "EPILOGUE_BIAS":
            # cuBLAS's M is our N: the bias is a vector of it, in the output's type
            bias_ptr = _bias(definition.m, BY_CUDA_NAME[definition.c_type].name)
        plan.run(*pointers, *(workspace or self.workspace), stream_ptr, bias_ptr)

    def algorithm(self, definition: GemmDefinition, sm_count_target: int = 0) -> tuple:
        """The algorithm this GEMM runs (sorted (name, value)): a configuration's ``lt_algo`` pins it."""
        return self._plan(definition, sm_count_target).algorithm()


_stream_ptr_getter = None  # set on first use: this module must import without CuPy


def _current_stream_ptr() -> int:
    """CuPy's current stream as an int, the cheapest way this CuPy offers (the GEMM hot path calls it)."""
    global _stream_ptr_getter
    if _stream_ptr_getter is None:
        from cupy.cuda import stream
        get_stream = stream.get_current_stream
        _stream_ptr_getter = getattr(stream, "get_current_stream_ptr", None) or (lambda: get_stream().ptr)
    return _stream_ptr_getter()


class _NeverRaised(Exception):
    """Stands for CuPy's CUBLASError where this CuPy has no gemmEx binding."""


def _no_cupy_binding(*args):
    raise NotImplementedError("this CuPy has no cublas.gemmEx binding")  # so the call goes through ctypes


# CuPy's Cython cublasGemmEx binding and its error, bound on the first GEMM (this module must import without
# CuPy); gemm()'s hot path calls the binding itself, as issue_gemm_ex does.
cupy_gemm_ex = None
CupyCublasError = _NeverRaised


def bind_cupy_gemm_ex() -> None:
    global cupy_gemm_ex, CupyCublasError
    try:
        from cupy_backends.cuda.libs import cublas as cupy_cublas
        CupyCublasError = cupy_cublas.CUBLASError  # first: a thread that sees the binding sees its error too
        cupy_gemm_ex = cupy_cublas.gemmEx
    except (ImportError, AttributeError):  # another CuPy layout: every call goes through ctypes
        cupy_gemm_ex = _no_cupy_binding


def _gemm_ex(*args) -> int:
    """``cublasGemmEx`` through ctypes, untyped (argtypes cost host time): its status."""
    return _cublas.gemm_ex_untyped()(*args)


# Device pointers wrapped as c_void_p, by address: making one per call costs host time.
_pointers: dict[int, c_void_p] = {}
_POINTER_CACHE_SIZE = 4096


def _pointer(ptr: int) -> c_void_p:
    wrapped = _pointers.get(ptr)
    if wrapped is None:
        if len(_pointers) >= _POINTER_CACHE_SIZE:
            _pointers.clear()
        wrapped = _pointers[ptr] = c_void_p(ptr)
    return wrapped


def as_ctypes(args: tuple) -> tuple:
    """cublasGemmEx's arguments with the pointers as cached ``c_void_p``, as its untyped ctypes call takes them."""
    op_b, op_a, n, m, k, alpha, b, b_type, ldb, a, a_type, lda, beta, c, c_type, ldc, compute, algo = args
    get = _pointers.get
    return (op_b, op_a, n, m, k, get(alpha) or _pointer(alpha), get(b) or _pointer(b), b_type, ldb,
            get(a) or _pointer(a), a_type, lda, get(beta) or _pointer(beta), get(c) or _pointer(c), c_type, ldc,
            compute, algo)


def cublas_error_of_cupy(err) -> _cublas.CublasError:
    """CuPy's CUBLASError from its cublasGemmEx binding as ours."""
    return _cublas.CublasError(getattr(err, "status", 14), "cublasGemmEx")


class Handle:
    """One cuBLAS handle with a fixed math mode; it follows CuPy's current stream unless pinned to one."""

    def __init__(self, ptr: int, config: GemmConfig, mode_source: ModeSource, device_id: int,
                 workspace_bytes: int | None = None, workspace=None, lt_path: LtPath | None = None):
        self._ptr = ptr
        self._ptr_c = c_void_p(ptr)  # made once: the GEMM hot path passes it untyped
        self._config = config
        self.compute_type = int(config.compute_type)  # cublasGemmEx's, read by gemm() on every call
        self.algo = int(config.algo)
        self._mode_source = mode_source
        self.device_id = device_id  # plain attributes (not properties): gemm() reads them on every call
        self._stream = None
        self._workspace_bytes = workspace_bytes
        self._workspace = workspace  # cupy MemoryPointer kept alive while the handle lives
        self._bound_stream_ptr = -1
        self.lt = lt_path  # the cuBLASLt path of a handle made with api="lt" (its every GEMM), else None
        self.cupy_ptr = self._cupy_fit()  # gemm() reads it on every call; 0: ctypes issues the GEMM
        self._sm_count_target = 0  # read by the cuBLASLt path, which plans for it in its own descriptor
        self._definitions: dict = {}  # definition()'s arguments -> GemmDefinition, validated once

    def close(self) -> None:
        """Destroy the cuBLAS handle (idempotent; ``cublasDestroy`` synchronizes the device)."""
        if self._ptr:
            ptr, self._ptr, self.cupy_ptr = self._ptr, 0, 0
            self._ptr_c = c_void_p(0)
            try:
                _cublas.cublas_destroy(ptr)
            finally:
                self._workspace = None  # freed only after the handle that used it is gone

    closed = property(lambda self: not self._ptr)

    def __enter__(self) -> Handle:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        with contextlib.suppress(Exception):  # interpreter shutdown: the library may already be gone
            self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"ptr=0x{self._ptr:x}"
        return f"<Handle {self._config.name} from {self._mode_source.value}, device {self.device_id}, {state}>"

    @property
    def ptr(self) -> int:
        """The ``cublasHandle_t`` as an int."""
        self.require_open()
        return self._ptr

    config = property(lambda self: self._config, doc="The configuration (its math mode read back from cuBLAS).")
    math_mode = property(lambda self: self._config.math_mode, doc="The math mode, without the flag.")
    math_mode_value = property(lambda self: self._config.math_mode_value, doc="The ``cublasMath_t``, flag included.")
    mode_source = property(lambda self: self._mode_source)
    stream = property(lambda self: self._stream, doc="The pinned CuPy stream; None: CuPy's current one.")
    workspace_bytes = property(lambda self: self._workspace_bytes, doc="The user workspace; None: cuBLAS's pool.")

    def read_math_mode(self) -> int:
        return _cublas.cublas_get_math_mode(self.ptr)

    @property
    def sm_count_target(self) -> int:
        """``cublasGetSmCountTarget``: the SM count cuBLAS heuristics assume (0 = the device's)."""
        return _cublas.cublas_get_sm_count_target(self.ptr)

    @sm_count_target.setter
    def sm_count_target(self, sm_count: int) -> None:
        if not is_int(sm_count, 0):
            raise ValueError(f"sm_count_target must be an int >= 0 (0 = the device's), not {sm_count!r}")
        _cublas.cublas_set_sm_count_target(self.ptr, sm_count)
        self._sm_count_target = sm_count

    def bind_stream(self, stream_ptr: int) -> None:
        """Issue later calls on ``stream_ptr`` (re-applying the workspace); cheap when unchanged."""
        if stream_ptr == self._bound_stream_ptr:
            return
        ptr = self.ptr
        _cublas.cublas_set_stream(ptr, stream_ptr)
        if self._workspace_bytes is not None:
            workspace_ptr = self._workspace.ptr if self._workspace is not None else 0
            _cublas.cublas_set_workspace(ptr, workspace_ptr, self._workspace_bytes)
        self._bound_stream_ptr = stream_ptr

    def set_stream(self, stream) -> None:
        self._stream = stream
        self.cupy_ptr = self._cupy_fit()
        if stream is not None:
            self.bind_stream(stream.ptr)

    def _cupy_fit(self) -> int:
        """The handle where CuPy's binding may issue its GEMMs, else 0. The binding re-binds the current stream on
        every call, resetting a workspace: it fits only a handle that follows the current stream, without a
        workspace, not cuBLASLt's."""
        return self._ptr if self._stream is None and self._workspace_bytes is None and self.lt is None else 0

    def current_stream_ptr(self) -> int:
        return self._stream.ptr if self._stream is not None else _current_stream_ptr()

    def bind_current_stream(self) -> c_void_p:
        """Bind to :meth:`current_stream_ptr` if needed; return the handle as a ``c_void_p`` (hot path)."""
        if not self._ptr:
            self.require_open()
        if self._stream is None:
            if self.cupy_ptr:
                # CuPy's binding may have re-bound the handle itself: the remembered stream is not to be trusted.
                self._bound_stream_ptr = -1
            self.bind_stream(_current_stream_ptr())
        return self._ptr_c

    def require_open(self) -> None:
        if not self._ptr:
            raise RuntimeError("this cuBLAS handle is closed; make a new one with create_handle()")

    def definition(self, input_dtype: str, output_dtype: str, compute: int, trans_a, trans_b, m: int, n: int,
                   k: int, batch: int = 1) -> GemmDefinition:
        """A GEMM of packed row-major operands as this handle issues it: cuBLASLt's call on a handle made with
        ``api="lt"`` (the configuration's own compute type as cuBLASLt takes it, TF32 math as
        COMPUTE_32F_FAST_TF32, and its epilogue), else cublasGemmEx's with the handle's algorithm. Made once for
        each GEMM: gemm() asks on every checked call, and a definition checks its fields as it is made."""
        arguments = (input_dtype, output_dtype, compute, bool(trans_a), bool(trans_b), m, n, k, batch, self.algo)
        made = self._definitions.get(arguments)
        if made is None:
            config, lt = self._config, self.lt is not None
            name = config.lt_compute_type.name if lt and compute == config.compute_type else ComputeType(compute).name
            key = GemmKey(input_dtype, output_dtype, name, bool(trans_a), bool(trans_b), n, k,
                          config.lt_epilogue if lt else "", m)
            if len(self._definitions) >= _DEFINITIONS_HELD:  # a program of ever new shapes: bounded
                self._definitions.clear()
            made = self._definitions.setdefault(arguments, key.packed(batch, None if lt else self.algo))
        return made

    def issue(self, definition: GemmDefinition, pointers: tuple, bias_ptr: int = 0) -> None:
        """Issue ``definition`` (:meth:`definition`'s) on ``pointers`` (alpha's and beta's host addresses, a, b, d:
        ``(alpha, a, b, beta, d)``): cuBLASLt's call on a handle made with ``api="lt"``, else cublasGemmEx's."""
        if self.lt is not None:
            self.require_open()
            self.lt.issue(definition, pointers, self.current_stream_ptr(), self._sm_count_target, bias_ptr)
        elif definition.batch_count > 1:
            self.issue_batched(definition.gemm_ex_args(*pointers))
        else:
            self.issue_gemm_ex(definition.gemm_ex_args(*pointers))

    def issuer(self, definition: GemmDefinition, pointers: tuple, bias_ptr: int = 0):
        """:meth:`issue` of one GEMM as a call without arguments, for a GEMM issued many times: cublasGemmEx's
        arguments made (and for one matrix wrapped for ctypes) once."""
        if self.lt is not None:
            return functools.partial(self.issue, definition, pointers, bias_ptr)
        args = definition.gemm_ex_args(*pointers)
        if definition.batch_count > 1:
            return functools.partial(self.issue_batched, args)
        return functools.partial(self.issue_gemm_ex, args, as_ctypes(args))

    def issue_batched(self, args: tuple) -> None:
        """``cublasGemmStridedBatchedEx(handle, *args)`` through ctypes: CuPy's binding has no batched call."""
        _cublas.gemm_strided_batched_ex(self.bind_current_stream(), args)

    def issue_gemm_ex(self, args: tuple, ctypes_args: tuple | None = None, via_cupy: bool = True) -> None:
        """``cublasGemmEx(handle, *args)`` through CuPy's binding where it fits (and ``via_cupy``: gemm() tried it
        already), else ctypes (``ctypes_args``: ``args`` as :func:`as_ctypes` wraps them, made once for a call
        issued many times)."""
        if not self._ptr:  # closed: say so, as the other paths do, not cuBLAS's NOT_INITIALIZED
            self.require_open()
        if via_cupy and self.cupy_ptr:
            if cupy_gemm_ex is None:
                bind_cupy_gemm_ex()
            try:  # CuPy binds the handle to the current stream itself; bind_current_stream knows
                cupy_gemm_ex(self.cupy_ptr, *args)
                return
            except NotImplementedError:  # the stream is being captured (CuPy refuses) or no binding: ctypes can
                pass
            except CupyCublasError as err:
                raise cublas_error_of_cupy(err) from None
        status = _gemm_ex(self.bind_current_stream(), *(ctypes_args or as_ctypes(args)))
        if status:
            raise _cublas.CublasError(status, "cublasGemmEx")


def create_handle(mode: GemmConfig | MathMode | int | str | None = None, *, stream=None,
                  workspace_bytes: int | None = None, atomics: bool = False) -> Handle:
    """A :class:`Handle` on the current device in ``mode`` (None: the env var's, else PEDANTIC), read back;
    ``stream``: pinned; ``workspace_bytes``: its own (None: the configuration's); ``atomics``: allowed."""
    config, source = resolve_config(mode)
    if workspace_bytes is None:
        workspace_bytes = config.workspace_bytes
    if workspace_bytes is None and config.api == "lt":
        workspace_bytes = LT_WORKSPACE_BYTES  # allocated now: a GEMM may first run under graph capture
    if workspace_bytes is not None and not is_int(workspace_bytes, 0):
        raise ValueError(f"workspace_bytes must be an int >= 0 or None, not {workspace_bytes!r}")
    require_gpu()
    import cupy
    device_id = cupy.cuda.runtime.getDevice()
    if config.api == "lt":
        lt_handle(device_id)  # here, not at the first GEMM, which may run under graph capture
    workspace = cupy.cuda.alloc(workspace_bytes) if workspace_bytes else None  # 512-byte aligned
    ptr = _cublas.cublas_create()
    lt_path = LtPath(config, device_id, workspace.ptr if workspace else 0, workspace_bytes or 0) if (
        config.api == "lt") else None
    handle = Handle(ptr, config, source, device_id, workspace_bytes, workspace, lt_path)
    try:
        _cublas.cublas_set_math_mode(ptr, config.math_mode_value)
        read_back = _cublas.cublas_get_math_mode(ptr)
        if read_back != config.math_mode_value:  # the cuBLAS in use does not know this mode
            raise _cublas.CublasError(15, f"cublasSetMathMode({config.name}) did not take: the handle reads back "
                                          f"{math_mode_name(read_back)}")
        if atomics:
            _cublas.cublas_set_atomics_mode(ptr, int(AtomicsMode.ALLOWED))
        handle.set_stream(stream)
        if stream is None and workspace_bytes is not None:
            handle.bind_stream(cupy.cuda.get_current_stream().ptr)
    except BaseException:
        handle.close()
        raise
    return handle


@contextlib.contextmanager
def math_mode(mode: GemmConfig | MathMode | int | str | None = None):
    """Set the math mode of CuPy's own handle for a block; warn where an env var defeats it."""
    config, _ = resolve_config(mode)
    value = config.math_mode_value
    require_gpu()
    import cupy
    for message in tf32_env_warnings(config.math_mode is MathMode.TF32):
        warnings.warn(message, RuntimeWarning, stacklevel=3)
    shared = cupy.cuda.device.get_cublas_handle()
    previous = _cublas.cublas_get_math_mode(shared)
    _cublas.cublas_set_math_mode(shared, value)
    try:
        yield value
    finally:
        _cublas.cublas_set_math_mode(shared, previous)


# Default handles, one per (device, configuration) in each thread: threads sharing one is a hazard.
_thread_handles = threading.local()


def _current_device() -> int:
    import cupy
    return cupy.cuda.runtime.getDevice()


def default_handle() -> Handle:
    """This thread's handle for the current device and the configuration the env var names."""
    config, _ = resolve_config(None)
    handles = getattr(_thread_handles, "handles", None)
    if handles is None:
        handles = _thread_handles.handles = {}
    key = (_current_device(), config)
    handle = handles.get(key)
    if handle is None or handle.closed:
        handle = handles[key] = create_handle(None)  # None, not config: the handle says where its mode came from
    return handle
