"""The inputs of a checked or timed GEMM, and its float64 reference.

Inputs are seeded random normal values made on the host with numpy, so the same shape and seed
give the same bits on every machine, and digests compare across processes and hosts. Never zeros:
they hide rounding.
"""

from __future__ import annotations

import dataclasses

from ._compare import bytes_digest
from .config import GemmConfig
from .shapes import GemmShape


def host_operands(shape: GemmShape, seed: int, config: GemmConfig | None = None):
    """Seeded random normal A and B in their stored layouts, as numpy arrays of the input type.

    Drawn in float32 and rounded on the host (bfloat16 by ml_dtypes, round to nearest even), so the
    rounded inputs, and their digests, are the same on every machine.
    """
    import numpy

    dtype = (config or GemmConfig()).a_type.numpy_dtype
    rng = numpy.random.default_rng(seed)
    return (rng.standard_normal(shape.a_shape, dtype=numpy.float32).astype(dtype, copy=False),
            rng.standard_normal(shape.b_shape, dtype=numpy.float32).astype(dtype, copy=False))


@dataclasses.dataclass(frozen=True)
class Operands:
    """A and B on the device, and the sha256 digests of their bytes (what makes two results comparable)."""

    a: object
    b: object
    digests: dict  # {"a": sha256 hex, "b": sha256 hex}


def upload_operands(shape: GemmShape, seed: int, config: GemmConfig | None = None) -> Operands:
    """:func:`device_operands` with the digests of the inputs, taken on the host before the upload."""
    a_host, b_host = host_operands(shape, seed, config)
    return Operands(*_upload(a_host, b_host), {"a": bytes_digest(a_host), "b": bytes_digest(b_host)})


def device_operands(shape: GemmShape, seed: int, config: GemmConfig | None = None):
    """A and B on the current device, complete: safe to read from any stream once this returns."""
    return _upload(*host_operands(shape, seed, config))


def _upload(a_host, b_host):
    import cupy

    operands = cupy.asarray(a_host), cupy.asarray(b_host)
    # The copies run on the current stream (usually the legacy default stream), which the checks'
    # non-blocking streams do not wait for, and CUDA lets a copy from pageable memory return before
    # its DMA has landed. Without this wait a check's first GEMM read a partly copied operand on the
    # H200: the workspace-config worker's reference for a 210 MiB A differed in 2 of 2 runs, each
    # time with other bits, and in 0 of 2 runs with the wait.
    cupy.cuda.get_current_stream().synchronize()
    return operands


class HostOperandCache:
    """A and B of each shape made once on the host, uploaded anew for every setup that asks.

    A shape timed in visits needs the same values on fresh buffers at each visit; numpy's generator
    takes up to a second for a mamba2-130m operand pair (258 MiB), an upload milliseconds. Holds at
    most ``budget_bytes`` of host memory; a shape beyond it is made anew each time.

    ``store``: a directory shared by a run's timing processes: a pair made by one is left there as
    raw bytes, and the next processes map it instead of drawing it again (seconds a process for
    the mamba2-130m shapes). Where the store cannot be written, each process makes its own.
    """

    def __init__(self, seed: int, budget_bytes: int, store: str | None = None):
        self.seed, self.budget_bytes, self.store = seed, budget_bytes, store
        self.held: dict = {}

    @property
    def held_bytes(self) -> int:
        return sum(a.nbytes + b.nbytes for a, b in self.held.values())

    def device_operands(self, shape: GemmShape, config: GemmConfig | None = None):
        """:func:`device_operands` of ``shape``, from the host copy when one is held."""
        key = (shape.spec, (config or GemmConfig()).a_type)
        pair = self.held.get(key)
        if pair is None:
            pair = self._stored(shape, config) if self.store else host_operands(shape, self.seed, config)
            if self.held_bytes + pair[0].nbytes + pair[1].nbytes <= self.budget_bytes:
                self.held[key] = pair
        return _upload(*pair)

    def _stored(self, shape: GemmShape, config: GemmConfig | None):
        """The pair from the store (mapped, read-only), or made here and left there for the next process."""
        import os

        import numpy

        dtype = numpy.dtype((config or GemmConfig()).a_type.numpy_dtype)
        # Named by the shape's spec, not by each operand's dimensions: B is drawn after A, from the same
        # generator, so two shapes whose B has the same dimensions have other B values.
        stem = f"seed{self.seed}_{dtype.name}_{shape.spec.replace(':', '_')}"
        paths = [os.path.join(self.store, f"{stem}_{role}.bin") for role in ("a", "b")]
        try:
            return tuple(numpy.memmap(path, dtype, mode="r", shape=dims)
                         for path, dims in zip(paths, (shape.a_shape, shape.b_shape)))
        except (OSError, ValueError):  # not there yet (or cut short): made here
            pass
        pair = host_operands(shape, self.seed, config)
        try:
            for path, array in zip(paths, pair):
                with open(path + ".part", "wb") as part:
                    array.tofile(part)
                os.replace(path + ".part", path)  # whole or absent: a reader never maps half a file
        except OSError:  # a full or read-only store: the next process makes its own
            pass
        return pair


def output(shape: GemmShape, config: GemmConfig | None = None, rows: int | None = None):
    """An uninitialised (M, N) output of the configuration's output type (``rows`` replaces M)."""
    import cupy

    return cupy.empty((shape.m if rows is None else rows, shape.n), (config or GemmConfig()).c_type.numpy_dtype)


def fp64_reference(shape: GemmShape, a, b):
    """``op(a) @ op(b)`` in float64 from the same (rounded) inputs: the yardstick of accuracy."""
    a64 = a.astype("float64")
    b64 = b.astype("float64")
    return (a64.T if shape.trans_a else a64) @ (b64.T if shape.trans_b else b64)
