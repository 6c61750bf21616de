"""Is there a usable GPU, and if not, why: the one place that turns CUDA's failures into one line."""

from __future__ import annotations

import functools

from .errors import CublasDetError


class NoGpuError(CublasDetError, RuntimeError):
    """No GPU can run cuBLAS here; the message is one line saying why and what to do."""


def gpu_unavailable_reason() -> str | None:
    """Return why no GPU can be used (one line), or ``None`` when one can.

    Checks, in order: CuPy importable, a CUDA driver, at least one device, libcublas loadable.
    """
    try:
        import cupy
    except ImportError as err:
        return f"CuPy is not installed ({err}); install it: pip install 'cublas-det[cuda12]' (or [cuda13])"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except cupy.cuda.runtime.CUDARuntimeError as err:
        text = str(err)
        status = getattr(err, "status", None)
        # cudaErrorStubLibrary (34), cudaErrorInsufficientDriver (35): no real driver loaded.
        if status in (34, 35) or "InsufficientDriver" in text:
            return f"no usable NVIDIA driver ({text}); run on a machine with an NVIDIA GPU and driver"
        if status == 100 or "NoDevice" in text:  # cudaErrorNoDevice
            return f"no CUDA device visible ({text}); check CUDA_VISIBLE_DEVICES"
        return f"CUDA could not be initialised ({text})"
    if count == 0:
        return "no CUDA device visible; check CUDA_VISIBLE_DEVICES"
    from ._cublas import CublasNotFoundError, library

    try:
        library()
    except CublasNotFoundError as err:
        return str(err)
    return None


@functools.cache
def _cached_reason() -> str | None:
    return gpu_unavailable_reason()


def require_gpu() -> None:
    """Raise :class:`NoGpuError` unless a GPU and libcublas are usable (the probe runs once)."""
    reason = _cached_reason()
    if reason is not None:
        raise NoGpuError(f"no GPU available: {reason}")


def gpu_available() -> bool:
    """True when :func:`require_gpu` would pass."""
    return _cached_reason() is None


def device_properties(device_id: int | None = None) -> dict:
    """Name, compute capability, SM count and L2 size of a device (the current one by default)."""
    import cupy

    if device_id is None:
        device_id = cupy.cuda.runtime.getDevice()
    props = cupy.cuda.runtime.getDeviceProperties(device_id)
    name = props["name"]
    try:  # tells physical GPUs apart in a multi-GPU report
        pci_bus_id = cupy.cuda.runtime.deviceGetPCIBusId(device_id)
    except (AttributeError, cupy.cuda.runtime.CUDARuntimeError):
        pci_bus_id = None
    return {
        "device_id": device_id,
        "name": name.decode() if isinstance(name, bytes) else str(name),
        "compute_capability": f"{props['major']}.{props['minor']}",
        "sm_count": int(props["multiProcessorCount"]),
        "l2_cache_bytes": int(props["l2CacheSize"]),
        "total_memory_bytes": int(props["totalGlobalMem"]),
        "pci_bus_id": pci_bus_id,
    }
