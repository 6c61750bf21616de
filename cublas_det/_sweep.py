"""Per-device sweep: the same GEMMs on every GPU of a host, and whether their bits agree.

cuBLAS promises identical bits only on GPUs of the same architecture and SM count, so on a node
of identical GPUs every device must give the same digest for a shape and mode. A device that
disagrees with its peers points at a fault or a different SKU. One worker process per device
(``_worker.py``) computes the digests, so the devices run at once and a crash on one device
never hides the others' results.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import time

from ._handle import math_mode_name
from ._report import benchmark_entry, layout
from ._worker import INTERRUPTED, WORKER_TIMEOUT_S, collect, kill_all, spawn
from .shapes import GemmShape


@dataclasses.dataclass(frozen=True)
class DeviceRun:
    """What one device's worker returned: its provenance and a result per ``spec|mode`` task."""

    device_id: int
    provenance: dict = dataclasses.field(default_factory=dict)  # fingerprint() on that device
    results: dict = dataclasses.field(default_factory=dict)
    error: str | None = None  # the worker as a whole failed (crash, timeout)
    elapsed_s: float = 0.0

    @property
    def name(self) -> str:
        return self.provenance.get("gpu", {}).get("name", "?")

    def describe(self) -> str:
        """``NVIDIA H200, cc 9.0, 132 SMs, PCI ..., cuBLAS 13.1.0, driver 13.0``, or the error."""
        if self.error:
            return f"error: {self.error}"
        gpu = self.provenance.get("gpu", {})
        parts = [gpu.get("name", "?"), f"cc {gpu.get('compute_capability', '?')}", f"{gpu.get('sm_count', '?')} SMs"]
        if gpu.get("pci_bus_id"):
            parts.append(f"PCI {gpu['pci_bus_id']}")
        parts += [f"cuBLAS {self.provenance.get('cublas_version', '?')}",
                  f"driver {self.provenance.get('driver_version', '?')}"]
        return ", ".join(parts)

    def short(self) -> str:
        """``device 1 (NVIDIA H200, 132 SMs, cuBLAS 13.1.0)`` for naming a device that differs."""
        gpu = self.provenance.get("gpu", {})
        return (f"device {self.device_id} ({gpu.get('name', '?')}, {gpu.get('sm_count', '?')} SMs, "
                f"cuBLAS {self.provenance.get('cublas_version', '?')})")


@dataclasses.dataclass(frozen=True)
class Agreement:
    """One shape in one mode across the devices: their digests, errors and own scenario failures."""

    shape: GemmShape
    mode: int
    digests: dict  # device id -> digest, for the devices that computed one
    errors: dict  # device id -> why it has no digest
    scenario_failures: dict  # device id -> scenarios that gave other bits on that device itself

    @property
    def mode_name(self) -> str:
        return math_mode_name(self.mode)

    @property
    def majority(self) -> str | None:
        """The digest most devices gave (ties go to the lowest device id), or None."""
        if not self.digests:
            return None
        counts = collections.Counter(self.digests.values())
        top = max(counts.values())
        return next(d for _, d in sorted(self.digests.items()) if counts[d] == top)

    @property
    def outliers(self) -> list[int]:
        """Devices whose digest differs from the majority."""
        return sorted(device for device, digest in self.digests.items() if digest != self.majority)

    @property
    def disagree(self) -> bool:
        """The devices that computed a digest did not all compute the same one."""
        return len(set(self.digests.values())) > 1

    @property
    def agree(self) -> bool:
        """Every device computed a digest and they are all the same."""
        return bool(self.digests) and not self.errors and not self.disagree

    @property
    def ok(self) -> bool:
        return self.agree and not self.scenario_failures


def parse_devices(values: list[str] | str, count: int) -> list[int]:
    """``all`` or device ids (``0,1`` / ``0 1``) -> ids, checked against the ``count`` visible devices.

    Raises:
        ValueError: one line naming the bad id and the ids that exist.
    """
    text = " ".join([values] if isinstance(values, str) else values).replace(",", " ").split()
    if not text:
        raise ValueError("--devices: give 'all' or device ids such as 0,1")
    if text == ["all"]:
        if count < 1:
            raise ValueError("--devices all: no CUDA device visible; check CUDA_VISIBLE_DEVICES")
        return list(range(count))
    devices = []
    for item in text:
        if not item.isdigit():
            raise ValueError(f"--devices: {item!r} is not a device id; give 'all' or ids such as 0,1")
        device = int(item)
        if device >= count:
            have = f"ids 0-{count - 1}" if count else "none"
            raise ValueError(f"--devices: there is no device {device}: this machine shows {count} GPU"
                             f"{'s' if count != 1 else ''} ({have}, as CUDA_VISIBLE_DEVICES numbers them); "
                             "use --devices all")
        if device not in devices:
            devices.append(device)
    return devices


def run_sweep(shapes: list[GemmShape], modes: list[int], devices: list[int], *, scenarios=(), repeats: int = 20,
              seed: int = 0, on_device=None, timeout_s: float = WORKER_TIMEOUT_S) -> list[DeviceRun]:
    """Run every shape in every mode on each device, one worker process per device, all at once.

    ``scenarios`` (in-process ones, such as ``repeat``) also run inside each worker, so a device
    that does not even repeat its own bits is caught. ``on_device(run)`` is called as each worker
    is collected. Returns one :class:`DeviceRun` per device, in the order given; on Ctrl-C the
    devices not yet collected carry the error :data:`INTERRUPTED`.
    """
    tasks = [{"spec": shape.spec, "name": shape.name, "mode": int(mode), "seed": seed}
             for shape in shapes for mode in modes]
    env = dict(os.environ)
    started = time.perf_counter()
    workers = {device: spawn({"device": device, "tasks": tasks, "scenarios": list(scenarios), "repeats": repeats},
                             env) for device in devices}
    runs = []
    try:
        for device, process in workers.items():
            answer, error = collect(process, timeout_s)
            run = DeviceRun(device, (answer or {}).get("provenance", {}), (answer or {}).get("results", {}), error,
                            (answer or {}).get("elapsed_s", time.perf_counter() - started))
            runs.append(run)
            if on_device is not None:
                on_device(run)
    except KeyboardInterrupt:  # keep what the finished workers returned; mark the rest
        done = {run.device_id for run in runs}
        runs += [DeviceRun(device, error=INTERRUPTED) for device in workers if device not in done]
    finally:
        kill_all(workers)
    return runs


def agreements(shapes: list[GemmShape], modes: list[int], runs: list[DeviceRun]) -> list[Agreement]:
    """Per shape and mode, what each device gave."""
    found = []
    for shape in shapes:
        for mode in modes:
            key = f"{shape.spec}|{int(mode)}"
            digests, errors, failures = {}, {}, {}
            for run in runs:
                task = run.results.get(key)
                if run.error or task is None:
                    errors[run.device_id] = run.error or "no result"
                elif task.get("error"):
                    errors[run.device_id] = task["error"]
                else:
                    digests[run.device_id] = task["digest"]
                    broke = [s["scenario"] for s in task.get("scenarios", []) if not s.get("identical", True)]
                    if broke:
                        failures[run.device_id] = broke
            found.append(Agreement(shape, int(mode), digests, errors, failures))
    return found


def _verdict(agreement: Agreement, devices: int) -> str:
    if not agreement.digests:
        return "no result"
    if agreement.disagree:
        return "NO"
    if agreement.errors:
        return f"partial ({len(agreement.digests)}/{devices} agree)"
    return "1 device only" if devices == 1 else f"yes ({devices}/{devices})"


def render_sweep(runs: list[DeviceRun], found: list[Agreement]) -> str:
    """The devices, then a row per shape and mode: do the devices agree, on which digest, who differs."""
    lines = ["Devices"]
    lines += [f"  {run.device_id}: {run.describe()}" + (f" ({run.elapsed_s:.1f} s)" if not run.error else "")
              for run in runs]
    by_id = {run.device_id: run for run in runs}
    header = ["shape", "mode", "devices agree", "digest", "differs / missing"]
    rows = []
    for agreement in found:
        notes = [by_id[d].short() + f": {agreement.digests[d][:12]}" for d in agreement.outliers]
        notes += [f"device {d}: " + ("no results (see Devices)" if by_id[d].error else error)
                  for d, error in sorted(agreement.errors.items())]
        notes += [f"device {d} does not repeat itself: {', '.join(s)}" for d, s in sorted(
            agreement.scenario_failures.items())]
        rows.append([agreement.shape.name, agreement.mode_name, _verdict(agreement, len(runs)),
                     (agreement.majority or "-")[:12], "; ".join(notes)])
    lines.append("")
    lines += layout(header, rows)
    lines += ["", "Summary"] + ["  " + line for line in sweep_summary(runs, found)]
    return "\n".join(lines)


def sweep_summary(runs: list[DeviceRun], found: list[Agreement]) -> list[str]:
    lines = [f"device {run.device_id} gave no results: {run.error}" for run in runs if run.error]
    for run in runs:
        missing = [a for a in found if run.device_id in a.errors] if not run.error else []
        if missing:
            lines.append(f"device {run.device_id} could not run {len(missing)} shape/mode pair(s), e.g. "
                         f"{missing[0].shape.name} {missing[0].mode_name}: {missing[0].errors[run.device_id]}")
    if len(runs) == 1:
        lines.append("one device: nothing to compare across devices; its digests go into --json for "
                     "--compare with other hosts")
    differing = [a for a in found if a.disagree]
    if len(runs) > 1 and found and not differing and not any(a.errors for a in found):
        lines.append(f"all {len(runs)} devices gave identical bits for all {len(found)} shape/mode pairs")
    for agreement in differing:
        who = ", ".join(f"device {d}" for d in agreement.outliers)
        lines.append(f"{agreement.shape.name} {agreement.mode_name}: {who} differ(s) from the other devices")
    names = {(run.name, run.provenance.get("gpu", {}).get("sm_count"), run.provenance.get("cublas_version"))
             for run in runs if not run.error}
    if differing and len(names) > 1:
        lines.append("the devices are not alike (name, SM count or cuBLAS version differ): cuBLAS does not "
                     "promise the same bits across them")
    unrepeatable = sorted({d for a in found for d in a.scenario_failures})
    if unrepeatable:
        lines.append(f"device(s) {', '.join(map(str, unrepeatable))} gave other bits on repeated runs of the same GEMM")
    return lines


def sweep_failed(runs: list[DeviceRun], found: list[Agreement]) -> bool:
    """Exit-1 condition: a device or task failed, devices disagree, or a device did not repeat itself."""
    return any(run.error for run in runs) or any(
        a.errors or a.scenario_failures or a.disagree for a in found)


def sweep_to_json(runs: list[DeviceRun], found: list[Agreement], provenance: dict, started: str, wall_s: float,
                  version: str) -> dict:
    """pytest-benchmark's layout (no timing stats), with every device's digest per shape and mode."""
    benchmarks = []
    for agreement in found:
        benchmarks.append(benchmark_entry(agreement.shape, agreement.mode_name, None, {
                "shape": agreement.shape.to_dict(),
                "digest": agreement.majority,
                "device_digests": {str(d): digest for d, digest in sorted(agreement.digests.items())},
                "device_errors": {str(d): error for d, error in sorted(agreement.errors.items())},
                "devices_agree": agreement.agree,
                "outliers": agreement.outliers,
                "scenario_failures": {str(d): s for d, s in sorted(agreement.scenario_failures.items())},
            }))
    devices = [{"device_id": run.device_id, "provenance": run.provenance, "error": run.error,
                "elapsed_s": run.elapsed_s} for run in runs]
    return {"machine_info": {**provenance, "devices": devices}, "commit_info": {}, "benchmarks": benchmarks,
            "datetime": started, "version": version,
            "cublas_det": {"sweep": True, "wall_s": wall_s, "summary": sweep_summary(runs, found)}}
