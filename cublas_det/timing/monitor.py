"""Who else uses the GPU while timing runs, and its clocks, power and temperature (NVML, optional): a
background thread reads NVML. In a container NVML lists host PIDs: without this one's, one listed is this."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
import threading
import time

from .clocks import default_sm_clock_mhz
from .rounds import THROTTLE_FRACTION

POLL_S = 0.25
# NVML's clock event reason bits (nvmlClocksEventReason*), by name.
EVENT_REASONS = {0x1: "GpuIdle", 0x2: "ApplicationsClocksSetting", 0x4: "SwPowerCap", 0x8: "HwSlowdown",
                 0x10: "SyncBoost", 0x20: "SwThermalSlowdown", 0x40: "HwThermalSlowdown",
                 0x80: "HwPowerBrakeSlowdown", 0x100: "DisplayClockSetting"}
SLOWDOWN_REASONS = ("HwSlowdown", "SwThermalSlowdown", "HwThermalSlowdown", "HwPowerBrakeSlowdown")
NOT_RECORDED = "GPU clocks, power, temperature and other processes are not recorded"
NO_NVML = f"nvidia-ml-py is not installed: {NOT_RECORDED} (pip install nvidia-ml-py)"


@dataclasses.dataclass(frozen=True)
class ProcessSeen:
    pid: int
    name: str = ""  # from /proc when the PID is visible here
    used_mib: float | None = None
    sm_util: int | None = None  # percent, where NVML keeps per-process samples


@dataclasses.dataclass(frozen=True)
class GpuSample:
    """One NVML reading (None where NVML did not answer)."""

    time_s: float
    processes: tuple[ProcessSeen, ...] = ()
    sm_mhz: int | None = None
    temperature_c: int | None = None
    power_w: float | None = None
    gpu_util: int | None = None
    event_reasons: int | None = None


@dataclasses.dataclass(frozen=True)
class GpuActivity:
    """What a stretch of NVML samples saw besides this process."""

    samples: int
    others: tuple[ProcessSeen, ...] = ()  # merged by PID: the most memory and SM utilisation seen
    ambiguous: bool = False  # this process's PID was not listed: one of ``others`` is this process
    sm_mhz: tuple[int, int] | None = None  # lowest and highest SM clock read
    temperature_c_max: int | None = None
    power_w_max: float | None = None
    gpu_util_max: int | None = None
    event_reasons: tuple[str, ...] = ()

    @property
    def other_count(self) -> int:
        return max(0, len(self.others) - 1) if self.ambiguous else len(self.others)

    @property
    def busy(self) -> bool:
        return self.other_count > 0

    def to_dict(self) -> dict:
        return {"samples": self.samples, "other_processes": [dataclasses.asdict(p) for p in self.others],
                "other_count": self.other_count, "ambiguous_pids": self.ambiguous,
                "sm_clock_mhz": list(self.sm_mhz) if self.sm_mhz else None,
                "temperature_c_max": self.temperature_c_max, "power_w_max": self.power_w_max,
                "gpu_util_max": self.gpu_util_max, "clock_event_reasons": list(self.event_reasons)}


def others_in(processes, own_pid: int) -> tuple[tuple[ProcessSeen, ...], bool]:
    if any(p.pid == own_pid for p in processes):
        return tuple(p for p in processes if p.pid != own_pid), False
    if len(processes) <= 1:  # only this one, under a PID from another namespace (or none at all)
        return (), False
    return tuple(processes), True


def summarize(samples, own_pid: int) -> GpuActivity:
    merged: dict[int, ProcessSeen] = {}
    ambiguous = False
    for sample in samples:
        others, unsure = others_in(sample.processes, own_pid)
        ambiguous = ambiguous or unsure
        for p in others:
            old = merged.get(p.pid)
            merged[p.pid] = p if old is None else ProcessSeen(
                p.pid, p.name or old.name, _max(old.used_mib, p.used_mib), _max(old.sm_util, p.sm_util))
    clocks = [s.sm_mhz for s in samples if s.sm_mhz is not None]
    reasons = tuple(name for bit, name in EVENT_REASONS.items() if any((s.event_reasons or 0) & bit for s in samples))
    return GpuActivity(
        len(samples), tuple(merged[pid] for pid in sorted(merged)), ambiguous and len(merged) > 0,
        (min(clocks), max(clocks)) if clocks else None,
        _max(*(s.temperature_c for s in samples)), _max(*(s.power_w for s in samples)),
        _max(*(s.gpu_util for s in samples)), reasons)


def _max(*values):
    return max((v for v in values if v is not None), default=None)


def _process_name(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as file:
            return file.read().strip()
    except OSError:
        return ""


class NvmlReader:
    """Reads one device through an NVML module (``pynvml``, or a stand-in)."""

    def __init__(self, nvml, bus_id: str | None = None, index: int = 0):
        self.nvml = nvml
        nvml.nvmlInit()
        self.handle = nvml.nvmlDeviceGetHandleByPciBusId(bus_id) if bus_id else nvml.nvmlDeviceGetHandleByIndex(index)
        self._last_util_ts = 0

    def _call(self, name: str, *args, scale: int = 1):
        """One NVML query, divided by ``scale``; None where the function is missing or NVML declines."""
        function = getattr(self.nvml, name, None)
        if function is None:
            return None
        try:
            value = function(self.handle, *args)
        except self.nvml.NVMLError:
            return None
        return value / scale if scale != 1 else value

    def sample(self) -> GpuSample:
        util_by_pid = {}
        for entry in self._call("nvmlDeviceGetProcessUtilization", self._last_util_ts) or []:
            util_by_pid[entry.pid] = max(util_by_pid.get(entry.pid, 0), entry.smUtil)
            self._last_util_ts = max(self._last_util_ts, entry.timeStamp)
        seen = {}
        for query in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"):
            for entry in self._call(query) or []:
                used = getattr(entry, "usedGpuMemory", None)
                seen[entry.pid] = ProcessSeen(entry.pid, _process_name(entry.pid),
                                              used / 2**20 if isinstance(used, int) else None,
                                              util_by_pid.get(entry.pid))
        power = self._call("nvmlDeviceGetPowerUsage", scale=1000)
        util = self._call("nvmlDeviceGetUtilizationRates")
        reasons = self._call("nvmlDeviceGetCurrentClocksEventReasons")
        if reasons is None:
            reasons = self._call("nvmlDeviceGetCurrentClocksThrottleReasons")
        sm_clock = self.nvml.NVML_CLOCK_SM
        return GpuSample(time.perf_counter(), tuple(seen.values()), self._call("nvmlDeviceGetClockInfo", sm_clock),
                         self._call("nvmlDeviceGetTemperature", self.nvml.NVML_TEMPERATURE_GPU), power,
                         util.gpu if util is not None else None, reasons)

    def limits(self) -> dict:
        name, sm = self._call("nvmlDeviceGetName"), self.nvml.NVML_CLOCK_SM
        return {"name": name.decode() if isinstance(name, bytes) else name,
                "sm_clock_max_mhz": self._call("nvmlDeviceGetMaxClockInfo", sm),
                "sm_clock_default_applications_mhz": self._call("nvmlDeviceGetDefaultApplicationsClock", sm),
                "sm_clock_applications_mhz": self._call("nvmlDeviceGetApplicationsClock", sm),
                "power_limit_w": self._call("nvmlDeviceGetPowerManagementLimit", scale=1000),
                "enforced_power_limit_w": self._call("nvmlDeviceGetEnforcedPowerLimit", scale=1000)}

    def close(self) -> None:
        with contextlib.suppress(self.nvml.NVMLError):
            self.nvml.nvmlShutdown()


def open_reader() -> tuple[NvmlReader | None, str | None]:
    """An NVML reader for the current CUDA device (matched by PCI bus id), or None and why not."""
    try:
        import pynvml
    except ImportError:
        return None, NO_NVML
    import cupy

    runtime = cupy.cuda.runtime
    try:  # NVML numbers devices its own way: match the CUDA device by its PCI bus id
        bus_id = runtime.deviceGetPCIBusId(runtime.getDevice())
    except (AttributeError, runtime.CUDARuntimeError):
        bus_id = None
    try:
        return NvmlReader(pynvml, bus_id), None
    except pynvml.NVMLError as err:
        return None, f"NVML could not be read ({err}): {NOT_RECORDED}"


_told = set()  # the notes said: each once per process


class GpuMonitor:
    """Samples the GPU in a background thread from :meth:`start` to :meth:`stop`."""

    def __init__(self, reader: NvmlReader | None, unavailable: str | None = None, *, poll_s: float = POLL_S,
                 own_pid: int | None = None, default_clock_mhz: float | None = None):
        self.reader = reader
        self.unavailable = unavailable
        self.default_clock_mhz = default_clock_mhz
        self.poll_s = poll_s
        self.own_pid = os.getpid() if own_pid is None else own_pid
        self.samples: list[GpuSample] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = None
        self._limits = reader.limits() if reader else None
        self._before = None

    @classmethod
    def start(cls, *, poll_s: float = POLL_S) -> GpuMonitor:
        reader, why = open_reader()
        if reader is None and why not in _told:
            _told.add(why)
            print(f"cublas_det: note: {why}", file=sys.stderr)
        monitor = cls(reader, why, poll_s=poll_s, default_clock_mhz=default_sm_clock_mhz())
        monitor.begin()
        return monitor

    def begin(self) -> None:
        """Read the GPU once now (the state before timing), then keep reading in the background."""
        if self.reader is None:
            return
        self.sample_now()
        self._before = summarize(self.samples, self.own_pid)
        self._thread = threading.Thread(target=self._poll, name="cublas_det-gpu-monitor", daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        while not self._stop.wait(self.poll_s):
            self.sample_now()

    def sample_now(self) -> None:
        sample = self.reader.sample()
        with self._lock:
            self.samples.append(sample)

    def mark(self) -> int:
        with self._lock:
            return len(self.samples)

    def activity_since(self, mark: int) -> GpuActivity | None:
        """What was seen from ``mark`` to now (reading once more now, so a short stretch has a sample)."""
        if self.reader is None:
            return None
        self.sample_now()
        with self._lock:
            return summarize(self.samples[mark:], self.own_pid)

    def stop(self) -> dict:
        """Stop sampling; the state for machine_info: limits, before, during (all None without NVML)."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
        during = self.activity_since(0)  # None without a reader
        if self.reader is not None:
            self.reader.close()
            self.reader = None
        return {"nvml": self._limits, "nvml_unavailable": self.unavailable,
                "sm_clock_default_mhz": self.default_clock_mhz, "throttle_floor_fraction": THROTTLE_FRACTION,
                "before": self._before.to_dict() if self._before else None,
                "during": during.to_dict() if during else None}
