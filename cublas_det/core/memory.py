"""Will a GEMM fit? An upper bound of the host and device bytes a check and a timing of one shape need, so that a
shape is refused within seconds, naming the bytes, not after its operands filled the host."""

from __future__ import annotations

import dataclasses
import os

from ..bits.digest import HASHERS
from .config import HOPPER_WORKSPACE_BYTES, GemmConfig
from ..base.errors import DoesNotFit
from .shapes import GemmShape
from ..base.words import size

# The timing rotates operand copies through about 3x the L2 (timing.stats.buffer_sets); 128 MiB bounds L2.
L2_BOUND_BYTES = 128 * 2**20
WORKSPACE_BYTES = HOPPER_WORKSPACE_BYTES  # each timed handle's own workspace (timing.engine)


@dataclasses.dataclass(frozen=True)
class Footprint:
    """Peak bytes one shape needs on the host and on the device."""
    host_bytes: int
    device_bytes: int


def footprint(shape: GemmShape, config: GemmConfig | None = None, *, timing: bool = True, arms: int = 4) -> Footprint:
    """An upper bound of the peak memory a check (and, with ``timing``, a timing) of ``shape`` needs."""
    config = config or GemmConfig()
    a, b, c = shape.operand_bytes(config.a_type.itemsize, config.c_type.itemsize)
    a64, b64, c64 = shape.operand_bytes(8, 8)  # their float64 twins
    # Host: A and B made with numpy before the upload, and the outputs copied back for their digests.
    host = a + b + HASHERS * c
    # Device, check: A, B, the reference and its float64 twin, and the most of: A and B in float64, the
    # scenarios' outputs (5 at most at once), a batch slice of A.
    device = a + b + c + c64 + max(a64 + b64, 5 * c, a + c)
    if timing:  # one setup at a time: operands made again, copies to rotate, a workspace per arm
        device = max(device, a + b + c + 3 * L2_BOUND_BYTES + arms * WORKSPACE_BYTES)
    return Footprint(host, device)


def host_available_bytes() -> int | None:
    try:
        with open("/proc/meminfo") as file:
            for line in file:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return None


def device_available_bytes() -> int:
    import cupy
    free, _total = cupy.cuda.runtime.memGetInfo()
    return free + cupy.get_default_memory_pool().free_bytes()


def check_fits(shape: GemmShape, config: GemmConfig | None = None, *, timing: bool = True) -> Footprint:
    """Raise :class:`DoesNotFit` (one line, naming the bytes) unless ``shape`` fits; return its footprint."""
    need = footprint(shape, config, timing=timing)
    host, device = host_available_bytes(), device_available_bytes()
    gib = lambda n: size(n, "GiB", places=1)  # noqa: E731
    if host is not None and need.host_bytes > host:
        raise DoesNotFit(f"{shape}: needs {gib(need.host_bytes)} of host memory for its operands, "
                         f"{gib(host)} available; choose a smaller --tokens or shape")
    if need.device_bytes > device:
        raise DoesNotFit(f"{shape}: needs up to {gib(need.device_bytes)} of GPU memory, {gib(device)} free; "
                         "choose a smaller --tokens or shape")
    return need
