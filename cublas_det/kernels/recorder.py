"""Record the kernels that run on the GPU through CUPTI's activity API (the optional ``cupti-python``). CUPTI is
process-wide: one recording at a time; a profiler registering its own callbacks takes them over until the next."""

from __future__ import annotations

from ..base.errors import KernelsUnavailable
from .records import KernelRecord

INSTALL = ("pip install 'cupti-python==13.*' for CUDA 13, '==12.*' for CUDA 12 (the kernels-cuda13 / kernels-cuda12 "
           "extras; it brings libcupti)")
BUFFER_BYTES = 8 * 1024 * 1024

_sink: list | None = None  # the running recording's records; None when none runs


def cupti_unavailable() -> str | None:
    """Why kernels cannot be recorded here (one line), or ``None`` when they can."""
    try:
        from cupti import cupti
    except ImportError as err:
        return f"kernel traces need NVIDIA's cupti-python: {INSTALL} ({err})"
    except OSError as err:  # the wheel is there, libcupti is not
        return f"kernel traces need libcupti, which cupti-python could not load: {INSTALL} ({err})"
    try:
        cupti.get_timestamp()  # the first call that loads libcupti
    except Exception as err:  # noqa: BLE001 - the binding raises its own types for a missing library
        return (f"kernel traces need libcupti, which cupti-python could not load: {INSTALL} "
                f"({type(err).__name__}: {err})")
    try:
        record_kernels(lambda: None)  # a recording of nothing: another CUPTI client (nsys, ncu) refuses it
    except KernelsUnavailable as err:
        return str(err)
    return None


def require_cupti() -> None:
    reason = cupti_unavailable()
    if reason:
        raise KernelsUnavailable(reason)


class KernelRecorder:
    """A context manager: on exit, ``records`` holds every kernel launched inside, in start order."""

    def __init__(self):
        self.records: list[KernelRecord] = []

    def __enter__(self) -> KernelRecorder:
        from cupti import cupti
        global _sink
        if _sink is not None:
            raise RuntimeError("a kernel recording is already running in this process")
        _sink = []
        try:
            cupti.activity_register_callbacks(lambda: (BUFFER_BYTES, 0), _buffer_completed)  # 0: as many records as fit
            cupti.activity_enable(cupti.ActivityKind.CONCURRENT_KERNEL)
        except cupti.cuptiError as err:
            _sink = None
            raise KernelsUnavailable(f"CUPTI refused to record kernels ({err}); is another profiler (nsys, ncu) "
                                     "attached to this process?") from None
        except BaseException:
            _sink = None
            raise
        return self

    def __exit__(self, *exc) -> None:
        import cupy
        from cupti import cupti
        global _sink
        try:
            cupy.cuda.runtime.deviceSynchronize()
            cupti.activity_flush_all(1)  # forced: the completed-buffer callback runs before this returns
        finally:
            try:
                cupti.activity_disable(cupti.ActivityKind.CONCURRENT_KERNEL)
                cupti.activity_flush_all(1)
            finally:  # whatever CUPTI said, the next recording may start
                self.records = sorted(_sink or [], key=lambda r: r.start_ns)
                _sink = None


def _buffer_completed(activities) -> None:
    from cupti import cupti
    if _sink is None:
        return
    kinds = (cupti.ActivityKind.CONCURRENT_KERNEL, cupti.ActivityKind.KERNEL)
    _sink.extend(KernelRecord.from_activity(a) for a in activities if a.kind in kinds)


def record_kernels(run) -> list[KernelRecord]:
    try:
        import cupy
    except ImportError as err:  # cupti-python without the cuda extras
        raise KernelsUnavailable(f"kernel traces run on CuPy, which is not here: pip install the cuda12 or cuda13 "
                                 f"extra (cupy-cuda12x or cupy-cuda13x) ({err})") from None
    cupy.cuda.runtime.deviceSynchronize()
    with KernelRecorder() as recorder:
        run()
    return recorder.records
