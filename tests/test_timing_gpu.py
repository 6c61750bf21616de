"""The timing engine on a GPU: the blocking kernel holds and times out, clock stamps read a plausible
SM clock, a shape is timed with its A/A arm and a stop reason, and the monitor records the device."""

import time

import pytest

from cublas_det.shapes import parse_shape


@pytest.mark.gpu
def test_the_blocking_kernel_holds_the_stream_until_released_and_gives_up_alone():
    import cupy

    from cublas_det.timing.hold import RELEASED, TIMED_OUT, TIMEOUT_NS, stream_hold

    hold = stream_hold(cupy.cuda.runtime.getDevice())
    stream = cupy.cuda.Stream(non_blocking=True)
    outcome = cupy.zeros(2, cupy.uint32)
    with stream:
        hold.hold(outcome[:1])
        marker = stream.record()
        time.sleep(0.02)
        assert not marker.done  # the event is queued behind the spinning kernel
        hold.release()
        marker.synchronize()
        hold.hold(outcome[1:])  # never released: gives up after TIMEOUT_NS
        started = time.perf_counter()
        stream.synchronize()
    waited = time.perf_counter() - started
    assert outcome.get().tolist() == [RELEASED, TIMED_OUT]
    assert TIMEOUT_NS * 1e-9 * 0.9 <= waited < 5.0
    hold.release()


@pytest.mark.gpu
def test_a_shape_is_timed_with_clocks_an_aa_arm_and_a_stop_reason():
    from cublas_det.timing import StopReason, time_shape, warm_up
    from cublas_det.timing.clocks import default_sm_clock_mhz

    warm_up(0.5)
    timing = time_shape(parse_shape("128x56x4096:nt"), ["pedantic", "tf32"], min_rounds=4, max_rounds=8,
                        budget_s=2.0)
    assert [a.name for a in timing.arms] == ["PEDANTIC", "TF32", "PEDANTIC-AA"]  # no DEFAULT: A/A of PEDANTIC
    assert timing.aa_ratio is not None and StopReason(timing.stop_reason) in StopReason
    # 4 setups: max_rounds is rounded down to whole passes, one at least (a 6-round Williams cycle of
    # 3 arms on each setup), so no setup is left with fewer rounds.
    assert timing.options["setups"] == 4 and timing.rounds == 6 * 4 and timing.discards.unheld == 0
    assert all(len(set(arm.setups)) == 4 for arm in timing.arms)
    default = default_sm_clock_mhz()
    assert default and 500 < default < 4000
    for arm in timing.arms:
        assert len(arm.clock_mhz) == timing.rounds and arm.median_clock_mhz is not None
        assert 0.3 * default < arm.median_clock_mhz < 1.2 * default, arm
        assert arm.median_us * timing.calls_per_batch >= 900  # a batch lasts about 1 ms or more
    assert timing.ratio("TF32", "PEDANTIC").median < 1


@pytest.mark.gpu
def test_the_monitor_records_the_device():
    from cublas_det.timing.monitor import GpuMonitor

    monitor = GpuMonitor.start(poll_s=0.05)
    mark = monitor.mark()
    time.sleep(0.2)
    activity = monitor.activity_since(mark)
    state = monitor.stop()
    assert set(state) >= {"nvml", "before", "during", "sm_clock_default_mhz"}
    if state["nvml"] is not None:  # nvidia-ml-py installed
        assert activity.samples >= 2 and state["before"] is not None and state["nvml"]["sm_clock_max_mhz"]
