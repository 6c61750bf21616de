"""The host operand cache of a run's visits: the same values each visit, made once, within a budget."""

import numpy
import pytest

from cublas_det import operands
from cublas_det.config import GemmConfig, resolve_config
from cublas_det.shapes import parse_shape

real = operands.host_operands


@pytest.fixture
def made(monkeypatch):
    """The shapes whose operands were drawn, in order; an upload is a host copy."""
    drawn = []

    def counted(shape, seed, config=None):
        drawn.append(shape.spec)
        return real(shape, seed, config)

    monkeypatch.setattr(operands, "host_operands", counted)
    monkeypatch.setattr(operands, "_upload", lambda a, b: (numpy.array(a), numpy.array(b)))  # a device copy stands in
    return drawn


def test_a_shape_is_made_once_and_uploaded_each_time_within_the_budget(made):
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


def test_a_store_lets_the_next_process_map_what_the_first_made(made, tmp_path):
    shape = parse_shape("96x40x24:tn")
    for config in (resolve_config("pedantic")[0], GemmConfig(input_dtype="bfloat16", output_dtype="bfloat16")):
        first = operands.HostOperandCache(seed=5, budget_bytes=2**30, store=str(tmp_path)).device_operands(shape, config)
        # a later process of the run: its own cache, the same store
        later = operands.HostOperandCache(seed=5, budget_bytes=2**30, store=str(tmp_path)).device_operands(shape, config)
        expected = real(shape, 5, config)
        for got in (first, later):
            assert all(x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()
                       for x, y in zip(got, expected))
    assert made == [shape.spec, shape.spec]  # once per input type, not once per process
    assert not list(tmp_path.glob("*.part"))
    # another seed is another pair; a store that cannot be written costs nothing but the drawing
    operands.HostOperandCache(seed=6, budget_bytes=2**30, store=str(tmp_path / "missing")).device_operands(
        shape, resolve_config("pedantic")[0])
    assert made[-1] == shape.spec and len(made) == 3


def test_shapes_whose_b_has_the_same_dimensions_keep_their_own_b_in_the_store(made, tmp_path):
    """B is drawn after A from one generator: W_in/forward and W_in/dX of the trunk share B's
    dimensions (128 x 56 and 56 x 128 stored as 128 x 56), not its values."""
    forward, dx = parse_shape("4096x128x56:tn"), parse_shape("4096x56x128:nn")
    fp32 = resolve_config("pedantic")[0]
    assert forward.b_shape == dx.b_shape
    first = operands.HostOperandCache(seed=0, budget_bytes=2**30, store=str(tmp_path))
    for shape in (forward, dx):
        first.device_operands(shape, fp32)
    later = operands.HostOperandCache(seed=0, budget_bytes=2**30, store=str(tmp_path))
    for shape in (forward, dx):
        got, expected = later.device_operands(shape, fp32), real(shape, 0, fp32)
        assert all(x.shape == y.shape and x.tobytes() == y.tobytes() for x, y in zip(got, expected)), shape.spec
