"""The SM clock of a timed batch, from %globaltimer and clock64 stamps, and the default clock to judge it by."""

from __future__ import annotations

import functools


def clock_mhz(start_ns: int, start_cycles: int, end_ns: int, end_cycles: int) -> float | None:
    """SM cycles per microsecond between two stamps taken on SM 0; None when a stamp is missing
    ((0, 0): no block of the stamping kernel landed on SM 0)."""
    start_ns, start_cycles, end_ns, end_cycles = map(int, (start_ns, start_cycles, end_ns, end_cycles))
    if not (start_ns and end_ns) or end_ns <= start_ns or end_cycles <= start_cycles:
        return None
    return (end_cycles - start_cycles) / ((end_ns - start_ns) / 1000)


@functools.cache
def default_sm_clock_mhz() -> float | None:
    """The current device's default (maximum boost) SM clock from CUDA, as nvbench judges throttling by; None if
    unknown (``cudaDevAttrClockRate``: CUDA 13 dropped ``cudaDeviceProp.clockRate``)."""
    import cupy
    runtime = cupy.cuda.runtime
    device_id = runtime.getDevice()
    try:
        khz = runtime.deviceGetAttribute(runtime.cudaDevAttrClockRate, device_id)
    except (AttributeError, runtime.CUDARuntimeError):
        return None
    return khz / 1000 if khz > 0 else None
