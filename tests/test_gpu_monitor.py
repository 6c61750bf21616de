"""The NVML monitor on a stand-in NVML module: what it reads, who counts as another process, the
summaries per stretch of time, and the run without nvidia-ml-py."""

import os
import sys
import time
import types

import pytest

from cublas_det.timing import monitor
from cublas_det.timing.monitor import (
    GpuMonitor,
    GpuSample,
    NvmlReader,
    ProcessSeen,
    others_in,
    summarize,
)

OWN = os.getpid()


class NVMLError(Exception):
    pass


def fake_nvml(processes=((OWN, 900 * 2**20),), utilization=None, clock=1980, reasons=0x4, with_event_reasons=True):
    """A stand-in for pynvml with the calls the reader makes; ``processes``: (pid, bytes) pairs, may change."""
    state = types.SimpleNamespace(processes=list(processes), calls=[])

    def entry(pid, used):
        return types.SimpleNamespace(pid=pid, usedGpuMemory=used)

    def not_supported(*_):
        raise NVMLError("Not Supported")

    def process_utilization(handle, since):
        if utilization is None:
            raise NVMLError("Not Found")  # NVML keeps no per-process samples
        return [types.SimpleNamespace(pid=pid, smUtil=util, timeStamp=since + 1) for pid, util in utilization]

    nvml = types.SimpleNamespace(
        NVMLError=NVMLError, NVML_CLOCK_SM=1, NVML_TEMPERATURE_GPU=0,
        nvmlInit=lambda: state.calls.append("init"), nvmlShutdown=lambda: state.calls.append("shutdown"),
        nvmlDeviceGetHandleByPciBusId=lambda bus: ("bus", bus), nvmlDeviceGetHandleByIndex=lambda i: ("index", i),
        nvmlDeviceGetComputeRunningProcesses=lambda h: [entry(p, u) for p, u in state.processes],
        nvmlDeviceGetGraphicsRunningProcesses=lambda h: [],
        nvmlDeviceGetProcessUtilization=process_utilization,
        nvmlDeviceGetClockInfo=lambda h, kind: clock, nvmlDeviceGetMaxClockInfo=lambda h, kind: 1980,
        nvmlDeviceGetDefaultApplicationsClock=not_supported, nvmlDeviceGetApplicationsClock=lambda h, kind: 1755,
        nvmlDeviceGetTemperature=lambda h, sensor: 41, nvmlDeviceGetPowerUsage=lambda h: 123_400,
        nvmlDeviceGetPowerManagementLimit=lambda h: 700_000, nvmlDeviceGetEnforcedPowerLimit=lambda h: 700_000,
        nvmlDeviceGetUtilizationRates=lambda h: types.SimpleNamespace(gpu=97, memory=40),
        nvmlDeviceGetCurrentClocksThrottleReasons=lambda h: 0x1, nvmlDeviceGetName=lambda h: b"NVIDIA H200")
    if with_event_reasons:
        nvml.nvmlDeviceGetCurrentClocksEventReasons = lambda h: reasons
    return nvml, state


def test_reader_samples_processes_clocks_power_and_limits():
    nvml, state = fake_nvml(processes=[(OWN, 900 * 2**20), (4242, 3 * 2**30)], utilization=[(4242, 88), (OWN, 50)])
    reader = NvmlReader(nvml, "0000:19:00.0")
    assert reader.handle == ("bus", "0000:19:00.0") and state.calls == ["init"]
    sample = reader.sample()
    assert sample.sm_mhz == 1980 and sample.temperature_c == 41 and sample.power_w == pytest.approx(123.4)
    assert sample.gpu_util == 97 and sample.event_reasons == 0x4
    other = next(p for p in sample.processes if p.pid == 4242)
    assert other.used_mib == 3072 and other.sm_util == 88
    limits = reader.limits()
    assert limits == {"name": "NVIDIA H200", "sm_clock_max_mhz": 1980, "sm_clock_default_applications_mhz": None,
                      "sm_clock_applications_mhz": 1755, "power_limit_w": 700.0, "enforced_power_limit_w": 700.0}
    reader.close()
    assert state.calls == ["init", "shutdown"]


def test_reader_falls_back_to_the_older_throttle_reasons_call():
    nvml, _ = fake_nvml(with_event_reasons=False)
    assert NvmlReader(nvml).sample().event_reasons == 0x1


def test_who_is_another_process():
    mine, theirs = ProcessSeen(OWN), ProcessSeen(4242)
    assert others_in((mine, theirs), OWN) == ((theirs,), False)
    assert others_in((mine,), OWN) == ((), False)
    # A container: NVML lists host PIDs, so our own PID is not there.
    assert others_in((ProcessSeen(1),), OWN) == ((), False)  # one process: this one
    assert others_in((ProcessSeen(1), ProcessSeen(2)), OWN) == ((ProcessSeen(1), ProcessSeen(2)), True)


def test_summarize_merges_processes_and_peaks():
    samples = [GpuSample(0.0, (ProcessSeen(OWN, "python3", 900.0), ProcessSeen(7, "python3", 100.0, 10)), 1980, 40,
                         300.0, 90, 0x4),
               GpuSample(0.3, (ProcessSeen(OWN), ProcessSeen(7, "", 2048.0, None)), 1410, 45, 690.0, 99, 0x40)]
    activity = summarize(samples, OWN)
    assert activity.busy and activity.other_count == 1 and not activity.ambiguous
    assert activity.others == (ProcessSeen(7, "python3", 2048.0, 10),)
    assert activity.sm_mhz == (1410, 1980) and activity.temperature_c_max == 45 and activity.power_w_max == 690.0
    assert activity.event_reasons == ("SwPowerCap", "HwThermalSlowdown")
    assert activity.to_dict()["other_processes"][0]["pid"] == 7
    quiet = summarize([GpuSample(0.0, (ProcessSeen(OWN),), 1980)], OWN)
    assert not quiet.busy and quiet.others == () and quiet.event_reasons == ()


def test_monitor_records_before_and_during_and_per_stretch():
    nvml, state = fake_nvml()
    mon = GpuMonitor(NvmlReader(nvml), poll_s=0.01, default_clock_mhz=1980.0)
    mon.begin()
    first = mon.mark()
    quiet = mon.activity_since(first)
    assert quiet is not None and not quiet.busy
    state.processes.append((4242, 2**30))  # a second process starts mid-run
    time.sleep(0.05)
    mark = mon.mark()
    loaded = mon.activity_since(mark)
    assert loaded.busy and loaded.others[0].pid == 4242 and loaded.samples >= 1
    gpu_state = mon.stop()
    assert gpu_state["before"]["other_count"] == 0 and gpu_state["during"]["other_count"] == 1
    assert gpu_state["nvml"]["power_limit_w"] == 700.0 and gpu_state["sm_clock_default_mhz"] == 1980.0
    assert gpu_state["nvml_unavailable"] is None and "shutdown" in state.calls
    assert mon._thread is None  # the polling thread has ended


def test_without_nvidia_ml_py_the_run_says_so_once_and_records_null(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml raises ImportError
    monkeypatch.setattr("cublas_det.timing.monitor.default_sm_clock_mhz", lambda device_id=None: 1980.0)
    monkeypatch.setattr(monitor, "_told", set())
    first = GpuMonitor.start()
    second = GpuMonitor.start()
    err = capsys.readouterr().err
    assert err.count("nvidia-ml-py is not installed") == 1 and err.startswith("cublas_det: note: ")
    assert first.mark() == 0 and first.activity_since(0) is None
    gpu_state = second.stop()
    assert gpu_state["nvml"] is None and gpu_state["before"] is None and gpu_state["during"] is None
    assert gpu_state["nvml_unavailable"] == monitor.NO_NVML and gpu_state["sm_clock_default_mhz"] == 1980.0
