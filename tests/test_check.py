import pytest

from cublas_det import GemmConfig, MathMode, check_gemm, check_many
from cublas_det.core.call import shape_gemm
from cublas_det.check.scenarios import REGISTRY as SCENARIOS
from cublas_det.core.shapes import batch_ladder, preset
from cublas_det.testing import assert_gemm_reproducible


def test_bad_repeats_is_a_value_error():
    with pytest.raises(ValueError, match="repeats must be an int >= 2"):
        check_gemm("8x8x8", repeats=1)


# -- planted faults on the GPU -----------------------------------------------------------------
_ATOMIC_GEMM = r"""
extern "C" __global__ void atomic_gemm(const float* a, const float* b, float* c, int m, int n, int k, int chunk) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y;
    if (col >= n) return;
    int k0 = blockIdx.z * chunk, k1 = min(k, k0 + chunk);
    float sum = 0.0f;
    for (int i = k0; i < k1; ++i) sum += a[row * k + i] * b[i * n + col];
    atomicAdd(&c[row * n + col], sum);  // partial sums land in whatever order the blocks finish
}
"""


def atomic_gemm(a, b, out, handle, shape):
    """A planted non-deterministic GEMM (row-major NN only): split-K partial sums added with atomicAdd."""
    import cupy

    kernel = cupy.RawKernel(_ATOMIC_GEMM, "atomic_gemm")
    chunk = 128
    out.fill(0)
    grid = ((shape.n + 63) // 64, shape.m, (shape.k + chunk - 1) // chunk)
    kernel(grid, (64,), (a, b, out, cupy.int32(shape.m), cupy.int32(shape.n), cupy.int32(shape.k),
                         cupy.int32(chunk)))


@pytest.mark.gpu
def test_planted_atomic_add_gemm_is_reported_and_located():
    check = check_gemm("64x64x65536:nn", "pedantic", repeats=20, scenarios=["repeat"], gemm_fn=atomic_gemm)
    result = check.scenario("repeat")
    assert not check.reproducible and check.verdict.value == "NO" and result.differing_runs > 0, str(result)
    assert result.mismatched_elements > 0 and result.max_ulp > 0
    row, col = result.index
    assert 0 <= row < 64 and 0 <= col < 64 and result.reference_value != result.actual_value
    assert check.rel_error < 1e-4  # it is a correct GEMM, only its bits wander
    with pytest.raises(AssertionError, match=r"(?s)not bit-for-bit reproducible.*Scenario: repeat.*at index \("):
        assert_gemm_reproducible(check)


@pytest.mark.gpu
def test_one_ulp_change_in_one_element_is_found_at_its_index():
    import cupy

    calls = []

    def perturb_third_run(a, b, out, handle, shape):
        shape_gemm(a, b, out, handle, shape)
        calls.append(1)
        if len(calls) == 3:
            out[37, 11] = cupy.nextafter(out[37, 11], cupy.float32(cupy.inf))

    check = check_gemm("128x56x4096:nt", "pedantic", repeats=10, scenarios=["repeat"], gemm_fn=perturb_third_run)
    result = check.scenario("repeat")
    assert (result.runs, result.differing_runs, result.mismatched_elements) == (10, 1, 1)
    assert result.max_ulp == 1 and result.index == (37, 11)
    assert result.actual_value == float(cupy.nextafter(cupy.float32(result.reference_value), cupy.float32(cupy.inf)))


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["default", "pedantic"])
def test_shared_handle_on_concurrent_streams_is_caught_on_a_split_k_shape(mode):
    # K = 262144: long split-K GEMMs overlap on the streams (at K = 65536 the race showed in about
    # half the tries on the H200, at 262144 in 6 of 6).
    check = check_gemm("64x64x262144:nn", mode, repeats=64, scenarios=["streams-shared-handle", "streams-per-handle"])
    shared, per_handle = check.scenario("streams-shared-handle"), check.scenario("streams-per-handle")
    assert shared.runs == 64 and shared.differing_runs > 0, str(shared)
    assert shared.index is not None and shared.mismatched_elements > 0
    assert per_handle.identical, str(per_handle)
    # The hazard is a finding: the GEMM stays reproducible unless the caller judges hazards too.
    assert check.reproducible and check.findings == (shared,)
    assert_gemm_reproducible(check)
    with pytest.raises(AssertionError, match="changed bits under hazard scenarios"):
        assert_gemm_reproducible(check, fail_on_hazards=True)


@pytest.mark.gpu
def test_no_false_positive_in_1000_repeats_of_trunk_and_2_7b_dw():
    shapes = preset("trunk") + [s for s in preset("mamba2-2.7b") if s.gemm_pass == "dW"]
    checks = check_many(shapes, ["pedantic", "default", "tf32"], repeats=1000, scenarios=["repeat"])
    assert len(checks) == 33
    for check in checks:
        result = check.scenario("repeat")
        assert result.runs == 1000 and result.identical, str(check)


@pytest.mark.gpu
def test_every_scenario_runs_and_records_facts():
    check = check_gemm("128x56x4096:nt", "pedantic", repeats=8, scenarios=list(SCENARIOS))
    assert [r.scenario for r in check.scenarios] == list(SCENARIOS)
    assert all(r.error is None for r in check.scenarios), [str(r) for r in check.failures]
    assert check.scenario("repeat").identical and check.scenario("fresh-handle").identical
    assert check.scenario("fresh-process").identical and check.scenario("fresh-process").runs == 3
    assert check.scenario("streams-per-handle").identical
    assert "CUBLAS_WORKSPACE_CONFIG=:4096:8" in check.scenario("workspace-config").detail
    modes = check.scenario("modes")
    assert set(modes.extra["matrix"]) == {f"{m}/{c}" for m in ("PEDANTIC", "DEFAULT", "TF32")
                                          for c in ("COMPUTE_32F", "COMPUTE_32F_PEDANTIC", "COMPUTE_32F_FAST_TF32")}
    assert ["PEDANTIC", "DEFAULT"] in modes.extra["groups"] and modes.differing_runs == 1
    assert modes.kind.value == "comparison"
    assert modes.extra["matrix"]["TF32/COMPUTE_32F"]["rel_error"] > 1e-5
    assert modes.extra["matrix"]["TF32/COMPUTE_32F_PEDANTIC"]["rel_error"] < 1e-5
    assert modes.extra["matrix"]["PEDANTIC/COMPUTE_32F_FAST_TF32"]["rel_error"] > 1e-5
    assert check.scenario("batch-invariance").runs == len(batch_ladder(128))  # a custom shape: M is its batch
    assert check.provenance["gpu"]["sm_count"] > 0 and len(check.digest) == 64
    assert check.config == GemmConfig(MathMode.PEDANTIC) and check.mode_source == "argument"
    assert check.rel_error < 1e-5 and check.reproducible
    forward, dw = [s for s in preset("trunk") if s.layer == "W_in" and s.gemm_pass in ("forward", "dW")]
    forward_check, dw_check = check_many([forward, dw], ["pedantic"], repeats=2, scenarios=["batch-invariance"])
    assert forward_check.scenario("batch-invariance").runs == len(batch_ladder(4096))
    assert dw_check.scenario("batch-invariance").not_applicable.startswith("the batch (T) is K")
    assert forward_check.verdict.value == "not checked"  # a hazard alone says nothing about reproducibility


@pytest.mark.gpu
def test_digests_are_the_same_across_calls_and_seeds_change_them():
    first = check_gemm("256x256x1024:nn", "pedantic", repeats=2, seed=3)
    again = check_gemm("256x256x1024:nn", "pedantic", repeats=2, seed=3)
    other = check_gemm("256x256x1024:nn", "pedantic", repeats=2, seed=4)
    assert first.digest == again.digest != other.digest



@pytest.mark.gpu
def test_a_batched_gemm_runs_every_scenario_and_the_timing_in_both_interfaces():
    from cublas_det.results.check import modes_group
    from cublas_det.core.shapes import parse_shape
    from cublas_det.timing import time_shapes

    shape = parse_shape("64x48x256:tn:b3")
    checks = check_many([shape], ["pedantic", "default+lt"], repeats=3,
                        scenarios=["repeat", "fresh-handle", "streams-shared-handle", "streams-per-handle",
                                   "batch-invariance", "sm-count", "modes"])
    for check in checks:
        assert not check.errors and not check.error and check.reproducible, check
        assert check.scenario("batch-invariance").compared  # rows of every matrix sliced
        assert modes_group(check) is not None
    run = time_shapes([shape], ["pedantic", "default+lt"], min_visits=2, max_visits=2, budget_s=0.1)
    assert not run.errors and run.timings[shape.name].arm("DEFAULT/lt").median_us > 0
