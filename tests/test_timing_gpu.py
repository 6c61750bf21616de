"""The timing engine on a GPU: the blocking kernel holds and times out, clock stamps read a plausible
SM clock, a shape is timed with its A/A arm and a stop reason, and the monitor records the device."""

import time

import pytest

from cublas_det.core.shapes import parse_shape


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
    from cublas_det.timing import StopReason, time_shapes, warm_up
    from cublas_det.timing.clocks import default_sm_clock_mhz

    warm_up(0.5)
    shape = parse_shape("128x56x4096:nt")
    timing = time_shapes([shape], ["pedantic", "tf32"], min_visits=1, max_visits=2, budget_s=2.0,
                         failures=()).timings[shape.name]
    assert [a.name for a in timing.arms] == ["PEDANTIC", "TF32", "PEDANTIC-AA"]  # no DEFAULT: A/A of PEDANTIC
    assert timing.aa_ratio is not None and StopReason(timing.stop_reason) in StopReason
    # Visits of one Williams cycle (6 rounds of 3 arms), two at least.
    assert timing.options["visits"] == timing.options["setups"] == 2 and timing.rounds == 6 * 2
    assert timing.discards.unheld == 0
    assert all(arm.setups == (0,) * 6 + (1,) * 6 for arm in timing.arms)
    default = default_sm_clock_mhz()
    assert default and 500 < default < 4000
    for arm in timing.arms:
        assert len(arm.clock_mhz) == timing.rounds and arm.median_clock_mhz is not None
        assert 0.3 * default < arm.median_clock_mhz < 1.2 * default, arm
        assert arm.median_us * timing.calls_per_batch >= 900  # a batch lasts about 1 ms or more
    assert timing.ratio("TF32", "PEDANTIC").median < 1


@pytest.mark.gpu
def test_shapes_are_timed_in_visits_on_setups_of_their_own_with_one_batch_size():
    from cublas_det.timing import time_shapes

    shapes = [parse_shape("128x56x4096:nt"), parse_shape("4096x128x128:tn")]
    run = time_shapes(shapes, ["pedantic", "tf32"], min_visits=3, max_visits=3, budget_s=30.0)
    assert not run.errors and not run.interrupted and list(run.timings) == [s.name for s in shapes]
    for timing in run.timings.values():
        assert timing.options["visits"] == 3 and timing.rounds == 18 and timing.stop_reason in ("interval", "rounds")
        assert all(arm.setups == tuple(v for v in range(3) for _ in range(6)) for arm in timing.arms)
        ratio = timing.ratio("TF32", "PEDANTIC")
        assert ratio.setup_half_width > 0 and ratio.ci_low < ratio.median < ratio.ci_high < 1
        assert timing.elapsed_s > 0


@pytest.mark.gpu
def test_each_arm_is_timed_eagerly_once_and_the_monitor_sees_no_other_process():
    from cublas_det.timing import time_shapes
    from cublas_det.timing.monitor import GpuMonitor

    shapes = [parse_shape("128x56x4096:nt"), parse_shape("4096x128x128:tn")]
    monitor = GpuMonitor.start()
    try:
        run = time_shapes(shapes, ["pedantic", "tf32"], min_visits=4, max_visits=4, budget_s=30.0, monitor=monitor)
    finally:
        monitor.stop()
    assert not run.errors and not run.interrupted and list(run.timings) == [s.name for s in shapes]
    for timing in run.timings.values():
        assert timing.options["visits"] == 4 and timing.rounds == 24
        assert timing.gpu_activity is None or not timing.gpu_activity.busy
        for arm in timing.arms:
            assert len(arm.graph_us) == 24 and len(arm.eager_us) == 1  # one eager batch an arm, in the first visit
            assert arm.eager_median_us > 0
        ratio = timing.ratio("TF32", "PEDANTIC")
        assert ratio.setup_dof == 3 and ratio.ci_low < ratio.median < ratio.ci_high < 1


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


@pytest.mark.gpu
def test_the_gpu_uuid_in_machine_info_is_the_one_nvml_reports():
    import re

    from cublas_det.core.device import device_properties

    gpu = device_properties()
    assert re.fullmatch(r"GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", gpu["uuid"] or "")
    pynvml = pytest.importorskip("pynvml", reason="nvidia-ml-py not installed: UUID not checked against NVML")
    pynvml.nvmlInit()
    try:
        uuid = pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetHandleByPciBusId(gpu["pci_bus_id"]))
    finally:
        pynvml.nvmlShutdown()
    assert gpu["uuid"] == (uuid.decode() if isinstance(uuid, bytes) else uuid)
