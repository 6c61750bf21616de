"""bf16 and fp16 GEMMs (what Mamba2 trains with under autocast), on the GPU."""

import pytest

from cublas_det import ComputeType, GemmConfig, MathMode, check_gemm, create_handle, gemm

BF16 = GemmConfig(MathMode.PEDANTIC, input_dtype="bfloat16", output_dtype="bfloat16")


def _rel_error(out, a, b):
    import cupy

    ref = a.astype(cupy.float64) @ b.astype(cupy.float64)
    return float(cupy.abs(out.astype(cupy.float64) - ref).max() / cupy.abs(ref).max())


@pytest.mark.gpu
@pytest.mark.parametrize("dtype, out_dtype, bound", [("bfloat16", "bfloat16", 1e-2), ("bfloat16", "float32", 1e-4),
                                                     ("float16", "float16", 2e-3), ("float16", "float32", 1e-4)])
def test_half_precision_gemm_is_accurate_against_fp64_of_the_rounded_inputs(dtype, out_dtype, bound):
    import cupy
    import numpy

    config = GemmConfig(input_dtype=dtype, output_dtype=out_dtype)
    rng = numpy.random.default_rng(0)
    a = cupy.asarray(rng.standard_normal((256, 512), dtype=numpy.float32).astype(config.a_type.numpy_dtype))
    b = cupy.asarray(rng.standard_normal((512, 128), dtype=numpy.float32).astype(config.a_type.numpy_dtype))
    out = cupy.empty((256, 128), config.c_type.numpy_dtype)
    with create_handle("pedantic") as handle:
        assert gemm(a, b, out=out, handle=handle) is out
    cupy.cuda.get_current_stream().synchronize()
    assert _rel_error(out, a, b) < bound


@pytest.mark.gpu
def test_fp16_compute_16f_takes_half_scalars():
    import cupy

    a = cupy.ones((64, 64), cupy.float16)
    with create_handle("pedantic") as handle:
        out = gemm(a, a, handle=handle, alpha=0.5, compute_type=ComputeType.COMPUTE_16F)
    assert out.dtype == cupy.float16 and float(out[3, 5]) == 32.0


@pytest.mark.gpu
def test_pytorch_bf16_tensors_go_through_without_a_copy():
    torch = pytest.importorskip("torch")
    import cupy

    a = torch.randn(512, 256, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(256, 128, device="cuda", dtype=torch.bfloat16)
    out = torch.empty(512, 128, device="cuda", dtype=torch.bfloat16)
    assert cupy.from_dlpack(a).data.ptr == a.data_ptr()  # the view CuPy makes shares the tensor's memory
    with create_handle(BF16) as handle:
        result = gemm(a, b, out=out, handle=handle)
    torch.cuda.synchronize()
    assert result is out
    expected = (a.double() @ b.double())
    assert float((out.double() - expected).abs().max() / expected.abs().max()) < 1e-2


@pytest.mark.gpu
def test_bf16_check_repeats_and_the_modes_matrix_groups_the_flag_and_compute_types():
    check = check_gemm("256x512x4096:nt", BF16, repeats=5, scenarios=["repeat", "fresh-handle", "modes"])
    assert check.reproducible, str(check)
    modes = check.scenario("modes")
    cells = modes.extra["matrix"]
    assert "PEDANTIC+DISALLOW_RPR/bfloat16->bfloat16/COMPUTE_32F_PEDANTIC" in cells and len(cells) == 8
    assert all(cell["rel_error"] < 1e-2 for cell in cells.values())
    names = {name for group in modes.extra["all_groups"] for name in group}
    assert names == set(cells) and len(check.input_digests["a"]) == 64


@pytest.mark.gpu
def test_planted_shared_handle_race_is_caught_in_fp16():
    # Measured on the H200 (cuBLAS 13.1): one handle on 4 concurrent streams changed fp16 bits with
    # COMPUTE_32F_PEDANTIC in 31 of 64 runs; one handle per stream in none.
    config = GemmConfig(MathMode.PEDANTIC, compute_type=ComputeType.COMPUTE_32F_PEDANTIC, input_dtype="float16",
                        output_dtype="float16")
    check = check_gemm("64x64x262144:nn", config, repeats=64, scenarios=["streams-shared-handle", "streams-per-handle"])
    shared, per_handle = check.scenario("streams-shared-handle"), check.scenario("streams-per-handle")
    assert shared.differing_runs > 0 and shared.index is not None, str(shared)
    assert per_handle.identical, str(per_handle)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_host_operands_are_rounded_on_the_host_and_their_digests_are_of_their_bytes(dtype):
    import hashlib

    pytest.importorskip("ml_dtypes")
    from cublas_det.bits.digest import bytes_digest
    from cublas_det.core.operands import host_operands
    from cublas_det.core.shapes import parse_shape

    config = GemmConfig(input_dtype=dtype, output_dtype=dtype)
    a, b = host_operands(parse_shape("8x4x16:nt"), 3, config)
    assert a.dtype == config.a_type.numpy_dtype and a.shape == (16, 8) and b.shape == (16, 4)
    assert bytes_digest(a) == hashlib.sha256(a.tobytes()).hexdigest()
    again, _ = host_operands(parse_shape("8x4x16:nt"), 3, config)
    assert bytes_digest(again) == bytes_digest(a)  # the same seed, the same rounded bits
