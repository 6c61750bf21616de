"""Start every timed batch from a queue: a kernel holds the stream while the batch is queued behind it,
so launch latency stays out of the interval (nvbench's ``blocking_kernel``; docs/method.md).

The kernel gives up after TIMEOUT_NS (a bug never hangs the GPU) and says so; each hold waits for
its own ticket. Clock stamps are taken on SM 0 only, so both read one SM's cycle counter.
"""

from __future__ import annotations

import ctypes
import functools

import numpy

TIMEOUT_NS = 100_000_000  # 100 ms: far longer than queueing a batch takes, unless the host stalls
RELEASED, TIMED_OUT = 1, 2
# What a profiler shows of this module (no GEMM): named with the prefix kernels.signature leaves out.
KERNEL_NAMES = ("cublas_det_hold_stream", "cublas_det_stamp_clock")

_SOURCE = r"""
extern "C" __global__ void cublas_det_hold_stream(unsigned long long flag_address, unsigned int ticket,
                                       unsigned long long timeout_ns, unsigned int* outcome) {
    const volatile unsigned int* flag = (const volatile unsigned int*)flag_address;
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    while (true) {
        if ((int)(*flag - ticket) >= 0) { *outcome = 1u; return; }
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
        if (now - start > timeout_ns) { *outcome = 2u; return; }
    }
}

extern "C" __global__ void cublas_det_stamp_clock(unsigned long long* out) {
    unsigned int smid;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
    if (smid == 0) {
        unsigned long long ns;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns));
        long long cycles = clock64();
        out[0] = ns;
        out[1] = (unsigned long long)cycles;
    }
}
"""


class StreamHold:
    """The blocking kernel, its host-mapped flag and the clock-stamp kernel, for the current device."""

    def __init__(self):
        import cupy
        runtime = cupy.cuda.runtime
        module = cupy.RawModule(code=_SOURCE)
        self._hold = module.get_function(KERNEL_NAMES[0])
        self._stamp = module.get_function(KERNEL_NAMES[1])
        self._sms = runtime.deviceGetAttribute(runtime.cudaDevAttrMultiProcessorCount, runtime.getDevice())
        # Mapped pinned memory, kept for the process's life; the device may see it at another address.
        self._host_ptr = runtime.hostAlloc(4, runtime.hostAllocMapped)
        self._flag = ctypes.c_uint32.from_address(self._host_ptr)
        self._flag.value = 0
        try:
            self._device_ptr = runtime.pointerGetAttributes(self._host_ptr).devicePointer or self._host_ptr
        except runtime.CUDARuntimeError:
            self._device_ptr = self._host_ptr
        self._ticket = 0

    def hold(self, outcome) -> None:
        """Queue the blocking kernel on the current stream; ``outcome`` (a 1-element uint32 array)
        receives RELEASED or TIMED_OUT."""
        self._ticket = (self._ticket + 1) % 2**32
        self._hold((1,), (1,), (numpy.uint64(self._device_ptr), numpy.uint32(self._ticket),
                                numpy.uint64(TIMEOUT_NS), outcome))

    def release(self) -> None:
        """Let the last held stream go (and every earlier one)."""
        self._flag.value = self._ticket

    def stamp(self, out) -> None:
        """Queue a kernel writing (%globaltimer ns, clock64 cycles) of SM 0 into ``out`` (2 uint64)."""
        self._stamp((self._sms,), (1,), (out,))


@functools.cache
def stream_hold(device_id: int) -> StreamHold:
    """One StreamHold per device, compiled once per process."""
    return StreamHold()
