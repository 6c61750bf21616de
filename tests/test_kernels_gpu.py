"""Kernel traces on a GPU with CUPTI: the recorder sees a GEMM's kernels, the sm-count scenario names the
kernel change behind a bit change, and --kernels and --explain work end to end.

Skipped with the reason without a GPU or without cupti-python (``pip install 'cupti-python==13.*'``)."""

import json

import pytest

SHAPE = "128x56x4096:nt"  # trunk W_in dW-like: split-K on an H200, halved when planned for fewer SMs


@pytest.fixture(autouse=True)
def _needs_cupti():
    from cublas_det.kernels.recorder import cupti_unavailable

    reason = cupti_unavailable()
    if reason:
        pytest.skip(reason)


@pytest.mark.gpu
def test_the_recorder_sees_one_calls_kernels_and_their_time():
    import cupy

    from cublas_det import create_handle
    from cublas_det.core.call import shape_gemm
    from cublas_det.kernels.recorder import KernelRecorder, record_kernels
    from cublas_det.kernels.signature import signature_of
    from cublas_det.core.operands import device_operands, output
    from cublas_det.core.shapes import parse_shape

    shape = parse_shape(SHAPE)
    a, b = device_operands(shape, 0)
    out = output(shape)
    with create_handle("pedantic") as handle:
        shape_gemm(a, b, out, handle, shape)
        sig = signature_of(record_kernels(lambda: shape_gemm(a, b, out, handle, shape)))
        assert sig is not None and sig.calls == 1 and sig.variants == 1 and sig.kernel_us > 0
        assert sig.math == "SIMT"  # PEDANTIC fp32 never runs on tensor cores
        with KernelRecorder() as nothing:
            cupy.cuda.runtime.deviceSynchronize()
        assert nothing.records == []  # a recording holds only what ran inside it
        with pytest.raises(RuntimeError, match="already running"), KernelRecorder(), KernelRecorder():
            pass


@pytest.mark.gpu
def test_sm_count_names_the_kernel_change_behind_each_bit_change():
    from cublas_det import check_gemm

    check = check_gemm(SHAPE, "pedantic", scenarios=["sm-count", "batch-invariance"], kernels=True, repeats=2)
    assert check.kernels is not None and check.kernels.launches
    result = check.scenario("sm-count")
    differing = [t for t, n in result.extra["mismatched_by_sm_count"].items() if n]
    assert set(result.extra["kernel_changes"]) == {f"{t} SMs" for t in differing}
    assert all(change != "kernels not recorded" for change in result.extra["kernel_changes"].values())
    assert set(result.extra["kernels"]) == {f"{t} SMs" for t in result.extra["mismatched_by_sm_count"]}
    if differing:
        assert result.extra["kernel_changes"][f"{differing[0]} SMs"] in result.detail
    batch = check.scenario("batch-invariance")  # M = 128: rows 1 ... 127, whose kernels change with M
    assert batch.changed_bits and batch.extra["kernel_changes"]
    assert all(label.startswith("m = ") for label in batch.extra["kernel_changes"])


@pytest.mark.gpu
def test_bench_with_kernels_reports_kernel_time_below_graph_time_and_why(tmp_path, capsys):
    from cublas_det.cli import bench

    path = tmp_path / "run.json"
    code = bench.main(["--shape", SHAPE, "--modes", "pedantic", "tf32", "--scenarios", "repeat", "sm-count",
                       "--kernels", "--quick", "--json", str(path)])
    assert code == 0
    out = capsys.readouterr().out
    assert "kernel µs" in out and "kernels PEDANTIC:" in out
    entries = {e["param"]: e
               for e in json.loads(path.read_text())["benchmarks"]}
    for entry in entries.values():
        info = entry["extra_info"]
        if info.get("kernel_time_s"):  # the summed kernels of a GEMM take no longer than its graph replay
            assert 0 < info["kernel_time_s"] <= entry["stats"]["median"] * 1.02
    assert sum(bool(e["extra_info"].get("kernel_time_s")) for e in entries.values()) >= 2


@pytest.mark.gpu
def test_explain_prints_one_table_per_shape(capsys):
    from cublas_det.cli import bench

    assert bench.main(["--explain", SHAPE, "--modes", "pedantic", "tf32"]) == 0
    out = capsys.readouterr().out
    assert "SM target 66" in out and "M = 1 " in out and "legend" in out and "PEDANTIC: kernel grid µs" in out
    assert "error" not in out
