"""Kernel traces on the CPU, from CUPTI activity records recorded on an H200 (tests/data/cupti_kernels_h200.json):
name demangling and shortening, grouping into calls, signatures, the kernel change behind a bit change,
the --explain table, the report's kernel columns and the JSON round trip."""

import json
import pathlib
import types

import pytest

from cublas_det.kernels import names
from cublas_det.check.explain import Explanation, render_explanation, sm_targets
from cublas_det.kernels.records import KernelRecord
from cublas_det.kernels.signature import (
    KernelSignature,
    calls_of,
    kernel_change,
    signature_of,
)

FIXTURE = pathlib.Path(__file__).resolve().parent / "data" / "cupti_kernels_h200.json"
CASES = json.loads(FIXTURE.read_text())["cases"]


def records(case: str) -> list[KernelRecord]:
    return [KernelRecord.from_dict(r) for r in CASES[case]["records"]]


def signature(case: str) -> KernelSignature:
    return signature_of(records(case), CASES[case]["calls"])


# -- names ---------------------------------------------------------------------------------------

def test_mangled_cublas_names_are_demangled_and_shortened_to_the_kernel():
    found = {names.short_name(r["name"]) for case in CASES.values() for r in case["records"]}
    assert {"cutlass_80_simt_sgemm_64x64_8x5_nt_align1", "cutlass_80_tensorop_s1688gemm_64x64_16x6_nt_align4",
            "splitKreduce_kernel", "gemvx::kernel", "hold_stream",
            "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT"} <= found
    # The launcher cutlass::Kernel2<NAME> is replaced by NAME; the xmma library trailer is dropped.
    assert not any(n.startswith(("_Z", "void", "cutlass::", "Kernel2")) for n in found)
    assert "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x64x8_stage3_warpsize1x4x1_ffma_aligna4_alignc4" in found
    assert not any(n.endswith("_cublas") for n in found)


def test_demangle_reads_the_cxx_abi_and_leaves_other_names_alone():
    mangled = "_ZN7cutlass7Kernel2I41cutlass_80_simt_sgemm_64x64_8x5_nt_align1EEvNT_6ParamsE"
    assert names.demangle(mangled).startswith("void cutlass::Kernel2<cutlass_80_simt_sgemm_64x64_8x5_nt_align1>(")
    assert names.demangle("cublas_det_hold_stream") == "cublas_det_hold_stream"
    assert names.demangle("_Znot_a_symbol") == "_Znot_a_symbol"  # does not demangle: kept


def test_a_launcher_over_a_builtin_type_keeps_its_own_name():
    assert names.short_name("void cutlass::Kernel<float>(float*)") == "Kernel"
    assert names.short_name("void ns::gemmSN_NN_kernel<float, 256, 4>(int)") == "gemmSN_NN_kernel"


def test_without_a_demangler_names_stay_as_cupti_gave_them(monkeypatch):
    monkeypatch.setattr(names, "_cxa_demangle", lambda: None)
    names.demangle.cache_clear()
    try:
        assert names.demangle("_ZN7cutlass7Kernel2I1xEEvv") == "_ZN7cutlass7Kernel2I1xEEvv"
    finally:
        names.demangle.cache_clear()


# -- records and calls ---------------------------------------------------------------------------

def test_a_record_comes_from_a_cupti_activity_and_round_trips():
    activity = types.SimpleNamespace(name="k", grid_x=2, grid_y=1, grid_z=64, block_x=128, block_y=1, block_z=1,
                                     start=100, end=4803, stream_id=7, correlation_id=9, graph_id=0, device_id=0)
    record = KernelRecord.from_activity(activity)
    assert record.grid == (2, 1, 64) and record.duration_ns == 4703
    assert KernelRecord.from_dict(json.loads(json.dumps(record.to_dict()))) == record


def test_records_group_into_calls_per_stream_a_reduce_joining_its_main_kernel():
    assert len(calls_of(records("128x56x4096:nt/pedantic"))) == 3  # 6 kernels: 3 x (sgemm + splitKreduce)
    assert [len(c) for c in calls_of(records("128x56x4096:nt/pedantic"))] == [2, 2, 2]
    assert len(calls_of(records("3352x768x16384:nt/pedantic"))) == 3  # one kernel each
    streams = calls_of(records("streams-shared/128x56x4096:nt/pedantic"))
    assert len(streams) == 8 and all(len({r.stream_id for r in call}) == 1 for call in streams)


def test_the_timing_engines_own_kernels_are_left_out():
    graph = records("graph/128x56x4096:nt/pedantic")
    assert any(names.short_name(r.name) == "hold_stream" for r in graph)  # recorded before the prefix
    sig = signature_of(graph, 20)
    assert sig.calls == 20 and sig.variants == 1 and [k.name for k in sig.launches] == [
        "cutlass_80_simt_sgemm_64x64_8x5_nt_align1", "splitKreduce_kernel"]


# -- signatures ----------------------------------------------------------------------------------

def test_signature_reads_math_tile_and_split_k_from_name_and_grid():
    pedantic, tf32 = signature("128x56x4096:nt/pedantic"), signature("128x56x4096:nt/tf32")
    assert (pedantic.math, pedantic.tile, pedantic.split_k) == ("SIMT", "64x64", 64)
    assert (tf32.math, tf32.tile, tf32.split_k) == ("tensor op", "64x64", 32)
    assert pedantic.brief() == "SIMT 64x64, split-K 64 + reduce"
    dw = signature("3352x768x16384:nt/pedantic")  # a z extent without a reduce kernel: not called split-K
    assert dw.split_k == 1 and dw.brief() == "SIMT 128x128, grid z 8"
    assert signature("4096x128x128:tn/pedantic/m1").math == "GEMV"
    bf16 = signature("128x56x4096:nt/default/bf16")  # nvjet splits K without a z extent: no number claimed
    assert bf16.split_k is None and bf16.brief() == "tensor op 32x64, split-K + reduce"


def test_kernel_time_is_the_mean_summed_duration_per_call():
    case = "128x56x4096:nt/pedantic"
    total_ns = sum(r["end_ns"] - r["start_ns"] for r in CASES[case]["records"])
    assert signature(case).kernel_us == pytest.approx(total_ns / 1e3 / 3)


def test_signature_round_trips_through_json():
    sig = signature("128x56x4096:nt/tf32")
    assert KernelSignature.from_dict(json.loads(json.dumps(sig.to_dict()))) == sig


def test_no_gemm_kernel_gives_no_signature():
    assert signature_of([r for r in records("graph/128x56x4096:nt/pedantic") if "hold" in r.name]) is None


# -- the kernel change behind a bit change -------------------------------------------------------

def test_fewer_sms_halve_the_split_k_of_the_pedantic_dw_gemm():
    assert kernel_change(signature("128x56x4096:nt/pedantic"), signature("128x56x4096:nt/pedantic/sm66")) == \
        "split-K 64 -> 32"
    change = kernel_change(signature("128x56x4096:nt/pedantic"), signature("128x56x4096:nt/pedantic/sm16"))
    assert change.startswith("the kernel changed from cutlass_80_simt_sgemm_64x64_8x5_nt_align1 to "
                             "cutlass_80_simt_sgemm_64x128_8x5_nt_align1") and "split-K 64 -> 32" in change
    assert kernel_change(signature("3352x768x16384:nt/pedantic"),
                         signature("3352x768x16384:nt/pedantic/sm66")) == "grid 216x1x8 -> 216x1x4"


def test_a_smaller_batch_can_bring_a_split_k_reduce():
    change = kernel_change(signature("4096x128x128:tn/pedantic/m4095"), signature("4096x128x128:tn/pedantic/m2"))
    assert "the kernel changed" in change and change.endswith("a split-K reduce appeared (splitKreduce_kernel)")


def test_same_kernels_say_the_bits_changed_inside_them():
    assert kernel_change(signature("128x56x4096:nt/pedantic"), signature("128x56x4096:nt/default")).startswith(
        "same kernels and grids")
    assert kernel_change(None, signature("128x56x4096:nt/default")) == "kernels not recorded"


def test_calls_that_ran_different_kernels_are_counted_as_variants():
    mixed = records("128x56x4096:nt/pedantic") + records("128x56x4096:nt/tf32")[:2]
    sig = signature_of(mixed)
    assert sig.variants == 2 and "(2 variants)" in sig.brief()
    assert [calls for _, calls in sig.sequences] == [3, 1]  # most frequent first
    change = kernel_change(signature("128x56x4096:nt/pedantic"), sig)
    assert change == ("the calls ran 2 different kernel sequences: 3 x cutlass_80_simt_sgemm_64x64_8x5_nt_align1 grid "
                      "2x1x64 + splitKreduce_kernel grid 2x8x1 (the reference's); 1 x cutlass_80_tensorop_s1688gemm_64x64_"
                      "16x6_nt_align4 grid 2x1x32 + splitKreduce_kernel grid 2x8x1")
    assert KernelSignature.from_dict(json.loads(json.dumps(sig.to_dict()))) == sig
    assert signature("128x56x4096:nt/pedantic").sequences == ()


def test_cublas_det_and_cupy_kernels_are_not_a_gemms():
    from cublas_det.kernels.signature import is_own

    assert is_own("cublas_det_track_mismatches_float32") and is_own("cupy_copy__float32_float32")
    assert is_own("cublas_det_hold_stream") and is_own("hold_stream") and is_own("cublas_det_mismatch_stats_f32") and not is_own("_ZN8cublasLt19splitKreduce_kernelILi32ELi16EiffffEEvv")
    tracker = KernelRecord("cublas_det_track_mismatches_float32", (9216, 1, 1), (128, 1, 1), 0, 10, 21)
    sig = signature_of(records("128x56x4096:nt/pedantic") + [tracker], 3)
    assert sig.variants == 1 and all(not k.name.startswith("cublas_det") for k in sig.launches)


def test_every_stream_of_a_shared_handle_ran_the_same_kernels():
    sig = signature_of(records("streams-shared/128x56x4096:nt/pedantic"))
    assert sig.calls == 8 and sig.variants == 1 and sig.launches == signature("128x56x4096:nt/pedantic").launches


def test_a_known_number_of_calls_keeps_a_gemm_of_two_main_kernels_one_call():
    prologue = KernelRecord("memset_kernel", (4, 1, 1), (256, 1, 1), 0, 500, 7)
    main = [KernelRecord.from_dict(r) for r in CASES["3352x768x16384:nt/pedantic"]["records"]][:1]
    one_call = [prologue] + [KernelRecord(**{**r.__dict__, "start_ns": 1000, "end_ns": 2000}) for r in main]
    sig = signature_of(one_call, 1)
    assert sig.calls == 1 and sig.variants == 1 and len(sig.launches) == 2 and sig.kernel_us == pytest.approx(1.5)
    assert "2 kernels" in sig.brief()
    assert len(calls_of(one_call)) == 2  # unknown count: each main kernel starts a call


def test_only_cublaslts_split_k_reduce_is_called_split_k():
    dot = KernelRecord("dot_kernel", (31, 1, 56), (128, 1, 1), 0, 3000, 7)
    reduce = KernelRecord("reduce_1Block_kernel", (1, 1, 1), (512, 1, 1), 3100, 4800, 7)
    sig = signature_of([dot, reduce], 1)
    assert sig.split_k == 1 and sig.brief() == "dot_kernel + reduce"
    assert kernel_change(signature("128x56x4096:nt/pedantic"), sig).endswith("the split-K reduce went away")
    assert kernel_change(sig, signature("128x56x4096:nt/pedantic")).endswith(
        "a split-K reduce appeared (splitKreduce_kernel)")


# -- --explain -----------------------------------------------------------------------------------

def test_sm_targets_step_down_from_the_device():
    assert sm_targets(132) == [116, 66, 33, 16]
    assert sm_targets(1) == []


def test_explain_table_keys_kernels_and_marks_cells_that_differ_from_the_whole_device():
    from cublas_det.core.shapes import parse_shape

    rows = (("device (132 SMs)", {"PEDANTIC": signature("128x56x4096:nt/pedantic"),
                                  "TF32": signature("128x56x4096:nt/tf32")}),
            ("SM target 66", {"PEDANTIC": signature("128x56x4096:nt/pedantic/sm66"),
                              "TF32": "error: CublasError: planted"}),
            ("SM target 16", {"PEDANTIC": signature("128x56x4096:nt/pedantic/sm16"),
                              "TF32": signature("128x56x4096:nt/tf32")}))
    text = render_explanation(Explanation(parse_shape("128x56x4096:nt"), 132, ("PEDANTIC", "TF32"), rows))
    lines = text.splitlines()
    device = next(line for line in lines if line.strip().startswith("device"))
    assert "k1+R 2x1x64 7.7" in device and "*" not in device
    sm66 = next(line for line in lines if "SM target 66" in line)
    assert "k1+R 2x1x32 8.1 *" in sm66 and "error" in sm66
    sm16 = next(line for line in lines if "SM target 16" in line)
    assert "k3+R 1x1x32" in sm16 and sm16.rstrip().endswith("5.9")  # TF32 as on the device: no mark
    assert "  k3 = cutlass_80_simt_sgemm_64x128_8x5_nt_align1 (SIMT tile 64x128)" in lines
    assert any(line.startswith("  +R = splitKreduce_kernel") for line in lines)
    assert "  error: CublasError: planted" in lines


def test_a_batch_row_is_marked_for_other_kernels_or_another_split_of_k_not_for_a_grid_that_follows_m():
    from cublas_det.check.explain import differs
    from cublas_det.kernels.signature import KernelLaunch

    device = signature("128x56x4096:nt/pedantic")  # grid 2x1x64 + reduce

    def like(grid):
        return KernelSignature((KernelLaunch(device.launches[0].name, grid, device.launches[0].block),
                                device.launches[1]), 3, 7.0)

    assert not differs(like((1, 1, 64)), device, batch_row=True)  # fewer rows, fewer tiles in x
    assert differs(like((1, 1, 36)), device, batch_row=True)  # K split otherwise
    assert differs(like((1, 1, 64)), device, batch_row=False)  # an SM target: the work on other SMs
    assert differs(signature("128x56x4096:nt/tf32"), device, batch_row=True)  # other kernels


def test_an_anonymous_namespace_is_not_taken_for_a_call():
    assert names.short_name("void (anonymous namespace)::k<float>(float*)") == "k"
    assert names.short_name("void at::native::(anonymous namespace)::matmul_kernel<float>(int)") == "matmul_kernel"


def test_a_name_without_a_function_in_it_is_kept_whole():
    for name in ("(x)", " ", "a ::", "::"):  # nothing before the call's brackets; no name between the colons
        assert names.short_name(name) == name
