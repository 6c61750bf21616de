"""The host operand cache of a run's visits: the same values each visit, made once, within a budget."""

import numpy

from cublas_det import operands
from cublas_det.config import GemmConfig, resolve_config
from cublas_det.shapes import parse_shape


def test_a_shape_is_made_once_and_uploaded_each_time_within_the_budget(monkeypatch):
    made = []

    def counted(shape, seed, config=None):
        made.append(shape.spec)
        return real(shape, seed, config)

    real = operands.host_operands
    monkeypatch.setattr(operands, "host_operands", counted)
    monkeypatch.setattr(operands, "_upload", lambda a, b: (a.copy(), b.copy()))  # a device copy stands in
    small, large = parse_shape("64x32x16"), parse_shape("512x256x128")
    fp32 = resolve_config("pedantic")[0]
    cache = operands.HostOperandCache(seed=3, budget_bytes=small.footprint_bytes * 4)
    first = cache.device_operands(small, fp32)
    again = cache.device_operands(small, fp32)
    assert made == ["64x32x16:nn"] and cache.held_bytes == first[0].nbytes + first[1].nbytes
    expected = real(small, 3, fp32)
    assert all(numpy.array_equal(x, y) for x, y in zip(again, expected))  # the values a fresh setup would make
    assert again[0] is not first[0]  # each setup gets buffers of its own
    cache.device_operands(large, fp32)
    cache.device_operands(large, fp32)
    assert made == ["64x32x16:nn", "512x256x128:nn", "512x256x128:nn"]  # beyond the budget: made anew each time
    bf16 = GemmConfig(input_dtype="bfloat16", output_dtype="bfloat16")
    assert cache.device_operands(small, bf16)[0].dtype != first[0].dtype  # another input type: other operands
