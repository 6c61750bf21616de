"""How the report shows a timing: what the times include, how each shape was timed, and the
warnings for throttled clocks, a busy GPU and an A/A control that failed (none on a quiet run)."""

from cublas_det.render import text
from cublas_det.results.bench import BenchResult, ShapeReport
from cublas_det.render.timing_text import TIME_NOTE, busy_warning, how_timed
from cublas_det.core.shapes import parse_shape
from cublas_det.timing import ArmTiming, Discards, Ratio, ShapeTiming
from cublas_det.timing.monitor import GpuActivity, ProcessSeen
from cublas_det.results.timing import Arm

SHAPE = "128x56x4096:nt"
OTHER = ProcessSeen(4242, "python3", 3072.0, 88)
NO_DISCARDS = Discards()


def _timing(aa=(1.001, 0.999, 1.003), discards=NO_DISCARDS, activity=None, clocks=(1980.0,) * 12):
    arms = tuple(ArmTiming(Arm.read(n), (t,) * 12, (2 * t,) * 12, clocks) for n, t in
                 (("PEDANTIC", 9.0), ("TF32", 7.0), ("PEDANTIC-AA", 9.0)))
    ratios = (Ratio("TF32", "PEDANTIC", 0.778, 0.776, 0.780, 12), Ratio("PEDANTIC-AA", "PEDANTIC", *aa, 12))
    return ShapeTiming(SHAPE, parse_shape(SHAPE).flop, 110, 60, 12, arms, ratios, 0.4, "interval", discards, 1485.0,
                       activity, {"visits": 3})


def _result(timing, gpu_state=None):
    provenance = {"gpu": {"name": "NVIDIA H200", "sm_count": 132}, "env": {}}
    if gpu_state is not None:
        provenance["gpu_state"] = gpu_state
    return BenchResult((ShapeReport(parse_shape(SHAPE), {}, timing),), provenance, "2026-11-29T00:00:00+00:00", 1.0,
                       "0.1.0")


def _quiet_state():
    quiet = GpuActivity(8, sm_mhz=(1980, 1980)).to_dict()
    return {"nvml": {"power_limit_w": 700.0}, "before": quiet, "during": quiet}


def test_a_quiet_run_shows_how_it_was_timed_and_warns_of_nothing():
    result = _result(_timing(activity=GpuActivity(2)), _quiet_state())
    rendered = text.render_text(result)
    # One sentence on what an interval holds; the method is in docs/, the engine's internals in --verbose.
    assert TIME_NOTE in rendered and "hold within this run" in TIME_NOTE and len(TIME_NOTE) <= 100 and "docs/method.md" in TIME_NOTE
    assert f"{SHAPE}  128x56x4096 op NT" in rendered and "GEMMs/batch" not in rendered
    assert how_timed(result.shapes[0].timing) == ("110 GEMMs/batch, 60 buffer sets, 12 rounds in 3 visits, stop: "
                                                  "interval, SM 1980 MHz, A/A 1.001")
    assert "  timed: 110 GEMMs/batch, 60 buffer sets" in text.render_text(result, verbose=True)
    assert text.warnings_for(result) == [] and "Warnings" not in rendered
    rows = [line.split() for line in rendered.splitlines() if line.startswith("  ") and line.split()[0] in
            ("PEDANTIC", "TF32", "PEDANTIC-AA")]
    assert [row[0] for row in rows] == ["PEDANTIC", "TF32"]  # the A/A arm is no mode of its own
    assert "not trusted" not in rendered


def test_how_timed_counts_one_of_a_kind_in_the_singular():
    timing = _timing(discards=Discards(throttled=1))
    one = ShapeTiming(SHAPE, timing.flop, 110, 1, 12, timing.arms, timing.ratios, 0.4, "interval", timing.discards,
                      1485.0, None, {"visits": 1})
    assert how_timed(one).startswith("110 GEMMs/batch, 1 buffer set, 12 rounds in 1 visit, ")
    assert any("(75% of the default) in 1 round: 1 redone" in note for note in text.warnings_for(_result(one)))


def test_a_failed_aa_control_marks_the_ratios_not_trusted_and_says_why():
    result = _result(_timing(aa=(1.012, 1.008, 1.015)))
    rendered = text.render_text(result, width=1000)  # unwrapped, to read whole sentences
    assert "0.778 ±0.3% (not trusted)" in rendered
    assert "  ratios not trusted: the A/A control PEDANTIC-AA/PEDANTIC 1.012 [1.008, 1.015] lies outside 1 ± 0.5%" \
        in rendered
    assert any(note.startswith(f"{SHAPE}: ratios not trusted:") for note in text.warnings_for(result))


def test_throttled_rounds_are_counted_in_the_heading_and_warned():
    timing = _timing(discards=Discards(throttled=10, kept_throttled=2), clocks=(1300.0,) * 2 + (1980.0,) * 10)
    assert "12 redone" not in how_timed(timing) and "10 redone" in how_timed(timing)
    notes = text.warnings_for(_result(timing))
    assert (f"{SHAPE}: SM clock below 1485 MHz (75% of the default) in 12 rounds: 10 redone, 2 kept after 10 redos "
            "(their times are at a low clock)") in notes


def test_another_process_on_the_gpu_is_named_in_one_line():
    busy = GpuActivity(5, (OTHER,), sm_mhz=(1700, 1980), event_reasons=("SwPowerCap", "HwThermalSlowdown"))
    state = {"nvml": {}, "before": GpuActivity(1).to_dict(), "during": busy.to_dict()}
    notes = text.warnings_for(_result(_timing(activity=busy), state))
    assert (f"another process used the GPU while timing ran: pid 4242 (python3) 3.0 GiB up to 88% SM; present while "
            f"timing 1 shape (e.g. {SHAPE}): their times are suspect") in notes
    assert "NVML reported clock slowdowns while timing ran: HwThermalSlowdown" in notes
    assert busy_warning(None, []) is None and busy_warning({"nvml": None, "before": None, "during": None}, []) is None
    unsure = GpuActivity(3, (ProcessSeen(1), ProcessSeen(2)), ambiguous=True).to_dict()
    assert "one of them is this process" in busy_warning({"during": unsure}, [])
