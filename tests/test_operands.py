"""The host operands of a run: the same values for every check and timing setup, drawn once (ahead of
use, in threads), within a budget, with their digests."""

import dataclasses
import threading

import numpy
import pytest

from cublas_det.core import operands
from cublas_det.bits.digest import bytes_digest
from cublas_det.core.config import GemmConfig, resolve_config
from cublas_det.core.shapes import parse_shape

real = operands.host_operands
FP32 = resolve_config("pedantic")[0]


@pytest.fixture
def made(monkeypatch):
    """The shapes whose operands were drawn, in order, and the threads that drew them; an upload is a host copy."""
    drawn = []

    def counted(shape, seed, config=None):
        drawn.append((shape.spec, threading.current_thread().name))
        return real(shape, seed, config)

    monkeypatch.setattr(operands, "host_operands", counted)
    monkeypatch.setattr(operands, "_upload", lambda a, b: (numpy.array(a), numpy.array(b)))  # a device copy stands in
    return drawn


def test_a_shape_is_made_once_and_uploaded_each_time_within_the_budget(made):
    small, large = parse_shape("64x32x16"), parse_shape("512x256x128")
    held = operands.HostOperands(seed=3, budget_bytes=operands.host_bytes(small) * 2, workers=0)
    first = held.device_pair(small, FP32)
    again = held.upload(small, FP32)
    assert [spec for spec, _ in made] == ["64x32x16:nn"]
    expected = real(small, 3, FP32)
    assert all(numpy.array_equal(x, y) for x, y in zip((again.a, again.b), expected))  # what a fresh draw makes
    assert again.digests == {"a": bytes_digest(expected[0]), "b": bytes_digest(expected[1])}
    assert again.a is not first[0]  # each upload gets buffers of its own
    held.device_pair(large, FP32)
    held.device_pair(large, FP32)
    assert [spec for spec, _ in made] == ["64x32x16:nn", "512x256x128:nn", "512x256x128:nn"]  # beyond the budget
    bf16 = GemmConfig(input_dtype="bfloat16", output_dtype="bfloat16")
    assert held.device_pair(small, bf16)[0].dtype != first[0].dtype  # another input type: other operands


def test_shapes_of_one_pair_of_arrays_share_one_draw(made):
    """The bits depend on the arrays' shapes, type and seed alone: the same arrays under another name are no
    second draw; another B is."""
    held = operands.HostOperands(seed=3, budget_bytes=1 << 20, workers=0)
    first = held.upload(parse_shape("64x32x16:nn"), FP32)
    renamed = held.upload(dataclasses.replace(parse_shape("64x32x16:nn"), name="in_proj"), FP32)
    assert [spec for spec, _ in made] == ["64x32x16:nn"] and renamed.digests == first.digests
    held.upload(parse_shape("64x32x16:nt"), FP32)  # B stored (N, K): another array
    assert [spec for spec, _ in made] == ["64x32x16:nn", "64x32x16:nt"]


def test_prefetched_pairs_are_drawn_in_threads_once_with_the_same_values(made):
    shapes = [parse_shape(spec) for spec in ("96x40x24:tn", "4096x128x56:tn", "4096x56x128:nn")]
    held = operands.HostOperands(seed=0, budget_bytes=2**30, workers=2)
    held.prefetch(shapes, FP32)
    held.prefetch(shapes, FP32)  # asked again: nothing more is drawn
    for shape in shapes:
        got, expected = held.upload(shape, FP32), real(shape, 0, FP32)
        assert got.a.tobytes() == expected[0].tobytes() and got.b.tobytes() == expected[1].tobytes(), shape.spec
    assert sorted(spec for spec, _ in made) == sorted(shape.spec for shape in shapes)
    assert all(thread.startswith("operands") for _, thread in made)
    held.close()
    held.device_pair(shapes[0], FP32)  # after close: drawn again, here
    assert made[-1] == (shapes[0].spec, threading.current_thread().name)


def test_prefetch_leaves_out_what_does_not_fit_the_budget(made):
    small, large = parse_shape("64x32x16"), parse_shape("512x256x128")
    held = operands.HostOperands(seed=1, budget_bytes=operands.host_bytes(small), workers=2)
    held.prefetch([large, small], FP32)
    held.device_pair(small, FP32)
    assert [spec for spec, _ in made] == ["64x32x16:nn"]


def test_a_shape_beyond_the_budget_is_drawn_again_with_the_same_bits_and_the_seed_results_record(made):
    from cublas_det.check import check_many
    from cublas_det.timing.engine import ShapeSetups

    large = parse_shape("512x256x128")
    held = operands.HostOperands(seed=7, budget_bytes=0, workers=0)
    first, again = held.upload(large, FP32), held.upload(large, FP32)
    assert [spec for spec, _ in made] == [large.spec] * 2  # beyond the budget: each visit draws it
    assert first.a.tobytes() == again.a.tobytes() and first.b.tobytes() == again.b.tobytes()
    assert first.digests == again.digests
    # Checks and timing record their seed: operands drawn from another one are refused, before any GPU work
    with pytest.raises(ValueError, match="drawn from seed 7, not 0"):
        ShapeSetups([large], [FP32], seed=0, aa_control=False, operands=held)
    with pytest.raises(ValueError, match="drawn from seed 7, not 0"):
        check_many([large], ["pedantic"], seed=0, operands=held)
