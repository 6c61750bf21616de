"""A GEMM's footprint has one home, ``GemmShape.operand_bytes``: it takes the element sizes, so a bf16
shape weighs half its fp32 twin, and the memory bound, the host operands' budget and the timing's buffer
sets all read it (the timing once sized bf16 buffer sets as if fp32)."""

import pytest

from cublas_det.core import memory, operands
from cublas_det.core.config import GemmConfig
from cublas_det.core.shapes import GemmShape, parse_shape
from cublas_det.timing import engine

from .conftest import needs_cuda_extra

SHAPE = parse_shape("4096x128x56:tn")
BF16 = GemmConfig(input_dtype="bfloat16", output_dtype="bfloat16")
FP32 = GemmConfig()


class _Sized(Exception):
    """Stops the timing's setup once it has sized its buffer sets, before any GPU work."""


@pytest.fixture
def sizes(monkeypatch):
    """The element sizes each call of the one footprint was given."""
    seen = []
    real = GemmShape.operand_bytes

    def spied(self, in_size, out_size):
        seen.append((in_size, out_size))
        return real(self, in_size, out_size)

    monkeypatch.setattr(GemmShape, "operand_bytes", spied)
    return seen


def test_a_bf16_shape_weighs_half_its_fp32_twin():
    assert SHAPE.operand_bytes(4, 4) == (4096 * 56 * 4, 56 * 128 * 4, 4096 * 128 * 4)
    assert sum(SHAPE.operand_bytes(2, 2)) * 2 == sum(SHAPE.operand_bytes(4, 4))
    assert operands.host_bytes(SHAPE, BF16) * 2 == operands.host_bytes(SHAPE, FP32)
    host = {config: memory.footprint(SHAPE, config, timing=False).host_bytes for config in (BF16, FP32)}
    assert host[BF16] * 2 == host[FP32]


def test_the_memory_bound_and_the_host_budget_read_the_one_footprint(sizes):
    memory.footprint(SHAPE, BF16)
    operands.host_bytes(SHAPE, BF16)
    assert sizes == [(2, 2), (8, 8), (2, 2)]  # the bound also weighs the float64 reference's operands


@needs_cuda_extra
def test_the_timings_buffer_sets_read_the_one_footprint_at_the_configurations_sizes(sizes, monkeypatch):
    import cupy

    footprints = []

    def buffer_sets(footprint_bytes, l2_bytes):
        footprints.append(footprint_bytes)
        raise _Sized

    monkeypatch.setattr(cupy.cuda, "Stream", lambda **_: None)  # no GPU here: the setup stops before using it
    monkeypatch.setattr(engine, "device_properties", lambda: {"l2_cache_bytes": 50 * 2**20})
    monkeypatch.setattr(engine, "buffer_sets", buffer_sets)
    for config in (BF16, FP32):
        with pytest.raises(_Sized):
            engine.ShapeBench(SHAPE, [config], operands=(None, None))
    assert sizes == [(2, 2), (4, 4)] and footprints == [sum(SHAPE.operand_bytes(n, n)) for n in (2, 4)]
