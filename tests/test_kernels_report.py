"""--kernels in the reports and on the command line, on the CPU: the kernel columns and lines, the kernel
change named beside a hazard's bit change, the JSON round trip, and what happens without CUPTI."""

import json

import pytest

from cublas_det.results.check import CallKernels, GemmCheck, Kind, ScenarioResult
from cublas_det.core.config import GemmConfig
from cublas_det.render import text
from cublas_det.render.markdown import to_markdown
from cublas_det.results.bench import BenchResult, ShapeReport
from cublas_det.check.stored import bench_result
from cublas_det.store.run import run_from_dict
from cublas_det.core.shapes import parse_shape
from cublas_det.timing import ArmTiming, Ratio, ShapeTiming
from cublas_det.results.timing import Arm


from .test_kernels import records, signature
from .conftest import bench_json, unwrapped

SHAPE = "128x56x4096:nt"


def _plain(case: str) -> CallKernels:
    """A recorded signature as results hold it: plain data, converted from its --json record."""
    return CallKernels.from_dict(signature(case).to_dict())


def _result(with_kernels: bool) -> BenchResult:
    shape = parse_shape(SHAPE)
    checks = {}
    for mode, case in (("PEDANTIC", "128x56x4096:nt/pedantic"), ("TF32", "128x56x4096:nt/tf32")):
        sm_count = ScenarioResult(
            "sm-count", Kind.HAZARD, 2, 2, 900, 7168, 1e-6, 12, (3, 4), 1.0, 1.0000001,
            "66 SMs: 900 elements differ (split-K 64 -> 32), 116 SMs: 880 elements differ",
            {"kernel_changes": {"66 SMs": "split-K 64 -> 32", "116 SMs": "split-K 64 -> 57"}} if with_kernels else {})
        checks[mode] = GemmCheck(shape, GemmConfig.parse(mode), "argument", 0, "ab" * 32, 2.6e-7,
                                 (ScenarioResult("repeat", Kind.GUARANTEE, 20, 0), sm_count),
                                 kernels=_plain(case) if with_kernels else None)
    arms = tuple(ArmTiming(Arm.read(name), tuple(us * (1 + 0.002 * (i % 2)) for i in range(10)), (us * 1.4,) * 10,
                           (1980.0,) * 10, kernel_us=kernel if with_kernels else None,
                           kernels=f"{name} kernels" if with_kernels else "", setups=(0,) * 5 + (1,) * 5)
                 for name, us, kernel in (("PEDANTIC", 9.9, 8.44), ("TF32", 8.2, 6.89)))
    timing = ShapeTiming(SHAPE, shape.flop, 120, 40, 10, arms, (Ratio("TF32", "PEDANTIC", 0.828, 0.826, 0.830, 10),),
                         0.5, "interval")
    return BenchResult((ShapeReport(shape, checks, timing),), {"gpu": {"name": "NVIDIA H200", "sm_count": 132}},
                       "2026-11-29T00:00:00+00:00", 1.0, "0.1.0")


def test_without_kernels_the_report_is_as_before():
    rendered = text.render_text(_result(False))
    assert "kernel µs" not in rendered and "why (kernels)" not in rendered and "kernels PEDANTIC" not in rendered
    assert not text.has_kernels(_result(False)) and text.header(text.has_kernels(_result(False))) == text.HEADER


def test_with_kernels_the_table_shows_kernel_time_and_kernels_and_the_finding_says_why():
    rendered = text.render_text(_result(True), width=1000)
    lines = rendered.splitlines()
    assert "kernel µs: the summed durations of a GEMM's kernels" in rendered
    header = next(line for line in lines if line.strip().startswith("mode"))
    assert header.rstrip().endswith("kernel µs  kernels")
    narrow = text.render_text(_result(True))  # 100 columns: the kernels column goes; the lines below stay
    assert "kernel µs" in narrow and "  kernels PEDANTIC: cutlass_80_simt_sgemm" in narrow
    assert "Left out to fit 100 columns: kernels" in narrow
    pedantic = next(line for line in lines if line.strip().startswith("PEDANTIC"))
    assert "8.4" in pedantic and pedantic.rstrip().endswith("SIMT 64x64, split-K 64 + reduce")
    assert ("  kernels PEDANTIC: cutlass_80_simt_sgemm_64x64_8x5_nt_align1 grid 2x1x64 + splitKreduce_kernel grid 2x8x1"
            in lines)
    why = [line for line in lines if "why (kernels)" in line]
    assert why == [f"  why (kernels): {SHAPE} PEDANTIC, 66 SMs: split-K 64 -> 32",
                   f"  why (kernels): {SHAPE} TF32, 66 SMs: split-K 64 -> 32"]


def test_markdown_carries_the_time_notes_and_kernel_columns():
    markdown = to_markdown(_result(True))
    assert "graph µs: per GEMM in a CUDA-graph replay" in markdown and "kernel µs: the summed" in markdown
    assert "| kernel µs | kernels |" in markdown and "- kernels TF32: cutlass_80_tensorop" in markdown
    assert "graph µs: per GEMM" in to_markdown(_result(False)) and "kernel µs" not in to_markdown(_result(False))


def test_kernels_survive_the_json_file_and_render_the_same():
    data = json.loads(json.dumps(bench_json(_result(True))))
    back = bench_result(run_from_dict(data, "run.json"))
    report = back.shapes[0]
    assert report.checks["PEDANTIC"].kernels == _plain("128x56x4096:nt/pedantic")
    assert report.timing.arm("TF32").kernel_us == pytest.approx(6.89)
    assert report.timing.arm("TF32").kernels == "TF32 kernels"
    assert report.timing.stop_reason == "interval"  # how the shape was timed is read back too
    original = _result(True).shapes[0].timing.arm("TF32")
    assert report.timing.arm("TF32").setups == original.setups  # so the interval is the one the run reported
    assert report.timing.arm("TF32").median_ci_us == pytest.approx(original.median_ci_us)
    assert report.checks["PEDANTIC"].scenario("sm-count").extra["kernel_changes"]["66 SMs"] == "split-K 64 -> 32"


def test_a_stored_check_keeps_the_signature():
    check = _result(True).shapes[0].checks["TF32"]
    back = bench_result(run_from_dict(json.loads(json.dumps(bench_json(_result(True)))), "run.json"))
    assert back.shapes[0].checks["TF32"].kernels == check.kernels
    plain = json.loads(json.dumps(bench_json(_result(False))))
    assert all("kernels" not in entry["extra_info"] for entry in plain["benchmarks"])
    assert bench_result(run_from_dict(plain, "run.json")).shapes[0].checks["TF32"].kernels is None


# -- without CUPTI -------------------------------------------------------------------------------

def test_cupti_unavailable_names_what_to_install():
    from cublas_det.kernels.recorder import cupti_unavailable

    reason = cupti_unavailable()
    if reason is None:
        pytest.skip("checks the path without CUPTI; cupti-python works here")
    assert "\n" not in reason and ("cupti-python" in reason or "CuPy" in reason) and "pip install" in reason


def test_cupti_without_cupy_names_cupy(monkeypatch):
    """cupti-python installed, CuPy not (the test extra alone): a reason, not an ImportError."""
    import sys
    import types

    from cublas_det.kernels.recorder import cupti_unavailable

    fake = types.ModuleType("cupti")
    fake.cupti = types.SimpleNamespace(get_timestamp=lambda: 0)
    monkeypatch.setitem(sys.modules, "cupti", fake)
    monkeypatch.setitem(sys.modules, "cupy", None)  # import cupy raises ImportError
    reason = cupti_unavailable()
    assert reason and "\n" not in reason and "CuPy" in reason and "pip install" in reason, reason


def test_kernels_flag_without_cupti_says_so_in_one_line_and_runs_on(monkeypatch, capsys):
    from cublas_det.cli import gemms

    monkeypatch.setattr(gemms, "cupti_unavailable", lambda: "kernel traces need NVIDIA's cupti-python: pip install x")
    assert gemms.kernels_available("cublas-det bench") is False
    err = unwrapped(capsys.readouterr().err)
    assert err.count("\n") == 1 and err.startswith("cublas-det bench: warning: --kernels: kernel traces need")
    assert "running without kernel traces" in err and "error" not in err


def test_explain_without_cupti_is_one_line_and_exit_2(monkeypatch, capsys):
    from cublas_det.cli import bench, explain
    from cublas_det.kernels import recorder

    monkeypatch.setattr(explain, "require_gpu", lambda: None)
    monkeypatch.setattr(recorder, "cupti_unavailable", lambda: "kernel traces need NVIDIA's cupti-python: pip install x")
    monkeypatch.setattr(explain, "explain_shape", lambda *a, **k: pytest.fail("ran without CUPTI"))
    for run in (lambda: explain.main([SHAPE], "cublas-det explain"), lambda: bench.main(["--explain", SHAPE], "b")):
        assert run() == 2
        err = unwrapped(capsys.readouterr().err)
        assert err.count("\n") == 1 and "kernel traces need NVIDIA's cupti-python" in err


def test_explain_names_a_catalogue_entry_or_a_shape_and_refuses_what_it_cannot_do(capsys):
    from cublas_det.cli import bench, explain
    from cublas_det.base.errors import UsageError

    assert explain.explain_target("mamba2-130m/in_proj/dW", 16384).spec == "3352x768x16384:nt"
    assert explain.explain_target(SHAPE, 16384).spec == SHAPE
    with pytest.raises(UsageError, match="neither a shape"):
        explain.explain_target("in_proj", 16384)
    with pytest.raises(SystemExit):
        bench.main(["--explain", SHAPE, "--json", "x.json"], "cublas-det bench")
    assert unwrapped(capsys.readouterr().err) == ("cublas-det bench --explain: error: explain prints one table and exits; drop "
                                       "--json\n")
    with pytest.raises(SystemExit):
        bench.main([f"--explain={SHAPE}", "--preset", "trunk", "--no-timing"])
    assert unwrapped(capsys.readouterr().err).endswith(": error: explain prints one table and exits; drop --preset, --no-timing\n")
    with pytest.raises(SystemExit):
        bench.main(["--kernels", "--devices", "all"], "cublas-det bench")
    assert unwrapped(capsys.readouterr().err).startswith("cublas-det bench: error: --kernels records kernels in this process")


def test_scenario_context_records_kernels_only_when_asked(monkeypatch):
    from cublas_det.check.scenarios.base import ScenarioContext

    ran = []
    context = ScenarioContext(parse_shape(SHAPE), GemmConfig(), None, None, None, None, None, 2, 0, None)
    assert context.traced(lambda: ran.append(1)) is None and ran == [1]
    assert context.kernel_extra({"66": None}, ["66"]) == {}
    recorded = ScenarioContext(parse_shape(SHAPE), GemmConfig(), None, None, None, None, None, 2, 0, None,
                               kernels=True, reference_kernels=signature("128x56x4096:nt/pedantic"))

    def record_kernels(run):  # CUPTI's part: what an H200 recorded for this GEMM at 66 SMs
        run()
        return records("128x56x4096:nt/pedantic/sm66")

    monkeypatch.setattr("cublas_det.kernels.signature.record_kernels", record_kernels)
    sig = recorded.traced(lambda: ran.append(2))
    assert ran == [1, 2] and sig.split_k == 32
    extra = recorded.kernel_extra({"66 SMs": sig, "116 SMs": None}, ["66 SMs"])
    assert extra["kernel_changes"] == {"66 SMs": "split-K 64 -> 32"} and extra["kernels"]["116 SMs"] is None
    assert recorded.kernel_extra({"4 streams": signature("128x56x4096:nt/pedantic")}, ["4 streams"],
                                 same="same on every stream")["kernel_changes"] == {"4 streams": "same on every stream"}
    assert extra["reference_kernels"]["split_k"] == 64


class FakeCuptiError(Exception):
    pass


def _fake_cupti(monkeypatch, refuse: bool):
    """A stand-in for cupti-python's ``cupti`` module whose activity_enable fails when ``refuse``."""
    import sys
    import types

    calls = []

    def enable(kind):
        calls.append("enable")
        if refuse:
            raise FakeCuptiError("CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED")

    inner = types.SimpleNamespace(
        ActivityKind=types.SimpleNamespace(CONCURRENT_KERNEL=10, KERNEL=3), cuptiError=FakeCuptiError,
        get_timestamp=lambda: 1, activity_register_callbacks=lambda requested, completed: calls.append("register"),
        activity_enable=enable, activity_disable=lambda kind: calls.append("disable"),
        activity_flush_all=lambda flag: calls.append("flush"))
    monkeypatch.setitem(sys.modules, "cupti", types.SimpleNamespace(cupti=inner))
    return calls


def test_cupti_refusing_to_record_is_one_line_and_the_next_recording_may_start(monkeypatch):
    from cublas_det.base.errors import KernelsUnavailable
    from cublas_det.kernels import recorder

    _fake_cupti(monkeypatch, refuse=True)
    with pytest.raises(KernelsUnavailable, match="CUPTI refused to record kernels") as caught:
        with recorder.KernelRecorder():
            pytest.fail("recorded although CUPTI refused")
    assert "\n" not in str(caught.value) and "nsys" in str(caught.value)
    assert recorder._sink is None  # nothing left running
    monkeypatch.setattr(recorder, "record_kernels", lambda run: (_ for _ in ()).throw(KernelsUnavailable("refused")))
    assert recorder.cupti_unavailable() == "refused"  # the probe records nothing, and says why it could not


def test_a_recording_ends_even_when_cupti_fails_to_stop(monkeypatch):
    from cublas_det.kernels import recorder

    calls = _fake_cupti(monkeypatch, refuse=False)
    import sys
    import types

    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(
        cuda=types.SimpleNamespace(runtime=types.SimpleNamespace(deviceSynchronize=lambda: None))))
    sys.modules["cupti"].cupti.activity_disable = lambda kind: (_ for _ in ()).throw(FakeCuptiError("disable"))
    with pytest.raises(FakeCuptiError), recorder.KernelRecorder():
        pass
    assert recorder._sink is None and calls[:2] == ["register", "enable"]
    sys.modules["cupti"].cupti.activity_disable = lambda kind: calls.append("disable")
    with recorder.KernelRecorder() as again:  # not "already running"
        pass
    assert again.records == []
