"""The inputs of a checked or timed GEMM, and its float64 reference: seeded random normals drawn on the host
(never zeros: they hide rounding), so a shape and seed give the same bits on every machine."""

from __future__ import annotations

import concurrent.futures
import dataclasses

import numpy

from ..bits.digest import bytes_digest
from .config import GemmConfig
from .memory import host_available_bytes
from .shapes import GemmShape


def host_operands(shape: GemmShape, seed: int, config: GemmConfig | None = None):
    """A and B in their stored layouts, as numpy arrays of the input type (drawn in float32, then rounded)."""
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


def device_operands(shape: GemmShape, seed: int, config: GemmConfig | None = None):
    return _upload(*host_operands(shape, seed, config))


def _upload(a_host, b_host):
    import cupy
    operands = cupy.asarray(a_host), cupy.asarray(b_host)
    # The checks' non-blocking streams do not wait for these copies, whose DMA may not have landed yet.
    cupy.cuda.get_current_stream().synchronize()
    return operands


def _made(shape: GemmShape, seed: int, config: GemmConfig | None):
    a, b = host_operands(shape, seed, config)
    return a, b, {"a": bytes_digest(a), "b": bytes_digest(b)}


class HostOperands:
    """A and B of each shape made once on the host (or anew, beyond ``budget_bytes``), with their digests."""

    def __init__(self, seed: int, budget_bytes: int | None = None, workers: int = 4):
        self.seed = seed
        self.budget_bytes = budget_bytes if budget_bytes is not None else (host_available_bytes() or 8 * 2**30) // 4
        self.workers = workers
        self._pool = None
        self._held: dict = {}  # (A's shape, B's shape, input type) -> (a, b, digests), or a Future of it
        self._held_bytes = 0

    @staticmethod
    def _key(shape: GemmShape, config: GemmConfig | None):
        """What the drawn bits depend on: the arrays' shapes and type (and the seed), not the GEMM's name."""
        return shape.a_shape, shape.b_shape, (config or GemmConfig()).a_type.name

    def prefetch(self, shapes, config: GemmConfig | None = None) -> None:
        if self.workers < 1:
            return
        for shape in shapes:
            key = self._key(shape, config)
            size = host_bytes(shape, config)
            if key in self._held or self._held_bytes + size > self.budget_bytes:
                continue
            if self._pool is None:
                self._pool = concurrent.futures.ThreadPoolExecutor(self.workers, thread_name_prefix="operands")
            self._held[key] = self._pool.submit(_made, shape, self.seed, config)
            self._held_bytes += size

    def _triple(self, shape: GemmShape, config: GemmConfig | None):
        key = self._key(shape, config)
        held = self._held.get(key)
        if held is None:  # beyond the budget, drawn again on each use: the same seed, the same bits
            held = _made(shape, self.seed, config)
            size = host_bytes(shape, config)
            if self._held_bytes + size <= self.budget_bytes:
                self._held[key], self._held_bytes = held, self._held_bytes + size
            return held
        if not isinstance(held, tuple):
            held = self._held[key] = held.result()
        return held

    def device_pair(self, shape: GemmShape, config: GemmConfig | None = None):
        a, b, _ = self._triple(shape, config)
        return _upload(a, b)

    def upload(self, shape: GemmShape, config: GemmConfig | None = None) -> Operands:
        a, b, digests = self._triple(shape, config)
        return Operands(*_upload(a, b), dict(digests))

    def close(self) -> None:
        """Drop the host copies; pairs not yet started are not drawn."""
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
        self._held, self._held_bytes = {}, 0


def same_seed(operands: HostOperands | None, seed: int) -> None:
    """Raise ValueError unless ``operands`` (if given) are drawn from ``seed``, the one results record."""
    if operands is not None and operands.seed != seed:
        raise ValueError(f"the host operands are drawn from seed {operands.seed}, not {seed}")


def host_bytes(shape: GemmShape, config: GemmConfig | None = None) -> int:
    """Host bytes of a shape's A and B (C is not held)."""
    config = config or GemmConfig()
    a, b, _ = shape.operand_bytes(config.a_type.itemsize, config.c_type.itemsize)
    return a + b


def output(shape: GemmShape, config: GemmConfig | None = None, rows: int | None = None):
    """An uninitialised output of the configuration's output type (``rows`` replaces M)."""
    import cupy
    return cupy.empty(shape.c_shape(rows), (config or GemmConfig()).c_type.numpy_dtype)


def fp64_reference(shape: GemmShape, a, b, cache: dict | None = None):
    """``op(a) @ op(b)`` in float64 from the same (rounded) inputs, kept in ``cache`` per input type."""
    key = ("fp64 reference", a.dtype.name)
    if cache is not None and key in cache:
        return cache[key]
    a64, b64 = a.astype("float64"), b.astype("float64")
    product = (a64.swapaxes(-1, -2) if shape.trans_a else a64) @ (b64.swapaxes(-1, -2) if shape.trans_b else b64)
    if cache is not None:
        cache[key] = product
    return product
