"""Per-device sweep: the same GEMMs on every GPU of a host (one worker process each, all at once), and
whether their digests agree, as identical GPUs must."""

from __future__ import annotations

import dataclasses
import os
import time

from ..bits.digest import digest_groups
from ..core.config import GemmConfig
from ..core.device import describe_machine
from ..core.shapes import GemmShape, gemm_key
from ..base.words import plural
from ..results.check import Kind
from .worker.parent import INTERRUPTED, collect, kill_all, spawn
from .worker.protocol import Request, Task


@dataclasses.dataclass(frozen=True)
class DeviceRun:
    """What one device's worker returned."""

    device_id: int
    provenance: dict = dataclasses.field(default_factory=dict)  # fingerprint() on that device
    results: dict = dataclasses.field(default_factory=dict)  # task key -> TaskAnswer
    error: str | None = None  # the worker as a whole failed (crash, timeout)
    elapsed_s: float = 0.0

    @property
    def name(self) -> str:
        return self.provenance.get("gpu", {}).get("name", "?")

    def describe(self) -> str:
        if self.error:
            return f"error: {self.error}"
        return describe_machine(self.provenance, ("gpu", "cc", "sm_count", "pci", "cublas", "driver"))

    def short(self) -> str:
        return f"device {self.device_id} ({describe_machine(self.provenance, ('gpu', 'sm_count', 'cublas'))})"


@dataclasses.dataclass(frozen=True)
class Agreement:
    """One shape in one configuration across the devices."""

    shape: GemmShape
    config: GemmConfig
    digests: dict  # device id -> digest, for the devices that computed one
    errors: dict  # device id -> why it has no digest, or a scenario that could not run there
    scenario_failures: dict  # device id -> guarantee scenarios that gave other bits on that device itself
    findings: dict = dataclasses.field(default_factory=dict)  # device id -> hazards that changed bits there
    input_digests: dict = dataclasses.field(default_factory=dict)  # sha256 of A and B, as the devices made them

    @property
    def mode_name(self) -> str:
        return self.config.name

    @property
    def majority(self) -> str | None:
        """The digest most devices gave (ties go to the lowest device id), or None."""
        groups = digest_groups(sorted(self.digests.items()))
        return max(groups, key=lambda digest: len(groups[digest]), default=None)

    @property
    def outliers(self) -> list[int]:
        return sorted(device for device, digest in self.digests.items() if digest != self.majority)

    @property
    def disagree(self) -> bool:
        return len(set(self.digests.values())) > 1

    @property
    def agree(self) -> bool:
        return bool(self.digests) and not self.errors and not self.disagree


def parse_devices(values: list[str] | str, count: int | None) -> list[int]:
    """``all`` or device ids (``0,1`` / ``0 1``), checked against the ``count`` visible devices (``None``:
    the syntax only, and ``all`` gives [])."""
    text = " ".join([values] if isinstance(values, str) else values).replace(",", " ").split()
    if not text:
        raise ValueError("--devices: give 'all' or device ids such as 0,1")
    if text == ["all"]:
        if count is None:
            return []
        if count < 1:
            raise ValueError("--devices all: no CUDA device visible; check CUDA_VISIBLE_DEVICES")
        return list(range(count))
    devices = []
    for item in text:
        if not item.isdigit():
            raise ValueError(f"--devices: {item!r} is not a device id; give 'all' or ids such as 0,1")
        device = int(item)
        if count is not None and device >= count:
            have = f"ids 0-{count - 1}" if count else "none"
            raise ValueError(f"--devices: there is no device {device}: this machine shows {plural(count, 'GPU')} "
                             f"({have}, as CUDA_VISIBLE_DEVICES numbers them); "
                             "use --devices all")
        devices.append(device)
    return list(dict.fromkeys(devices))


def run_sweep(shapes: list[GemmShape], configs: list[GemmConfig], devices: list[int], *, scenarios=(),
              repeats: int = 20, seed: int = 0, on_device=None) -> list[DeviceRun]:
    """One :class:`DeviceRun` per device (in-process ``scenarios`` run in each worker); ``on_device(run)`` as
    each is collected. On Ctrl-C the devices not yet collected carry the error :data:`INTERRUPTED`."""
    tasks = tuple(Task(shape, config, seed) for shape in shapes for config in configs)
    env = dict(os.environ)
    started = time.perf_counter()
    workers: dict = {}
    runs = []
    try:
        for device in devices:  # inside the try: a failure to start one never leaves the others running
            workers[device] = spawn(Request(device, tasks, tuple(scenarios), repeats), env)
        for device, process in workers.items():
            answer, error = collect(process)
            if answer is None:
                run = DeviceRun(device, error=error, elapsed_s=time.perf_counter() - started)
            else:
                run = DeviceRun(device, answer.provenance, answer.results, None, answer.elapsed_s)
            runs.append(run)
            if on_device is not None:
                on_device(run)
    except KeyboardInterrupt:  # keep what the finished workers returned; mark the rest
        done = {run.device_id for run in runs}
        runs += [DeviceRun(device, error=INTERRUPTED) for device in devices if device not in done]
    finally:
        kill_all(workers)
    return runs


def agreements(shapes: list[GemmShape], configs: list[GemmConfig], runs: list[DeviceRun]) -> list[Agreement]:
    """Per shape and configuration, what each device gave (a hazard that changed bits is a finding)."""
    found = []
    for shape in shapes:
        for config in configs:
            key = gemm_key(shape.spec, config.name)
            digests, errors, failures, findings, inputs = {}, {}, {}, {}, {}
            for run in runs:
                task = run.results.get(key)
                if run.error or task is None:
                    errors[run.device_id] = run.error or "no result"
                elif task.error or not task.digest:
                    errors[run.device_id] = task.error or "no digest"
                else:
                    digests[run.device_id] = task.digest
                    inputs = inputs or task.input_digests
                    for found_in, kind in ((failures, Kind.GUARANTEE), (findings, Kind.HAZARD)):
                        changed = [r.scenario for r in task.scenarios if r.kind is kind and r.changed_bits]
                        if changed:
                            found_in[run.device_id] = changed
                    # Only a guarantee that could not run leaves the device's verdict open; a hazard's does not.
                    failed = [f"{r.scenario}: {r.error}" for r in task.scenarios
                              if r.error and r.kind is Kind.GUARANTEE]
                    if failed:
                        errors[run.device_id] = "; ".join(failed)
            found.append(Agreement(shape, config, digests, errors, failures, findings, inputs))
    return found


def sweep_failed(runs: list[DeviceRun], found: list[Agreement]) -> bool:
    """Exit-1 condition: a device or task failed, devices disagree, or a device broke a guarantee itself."""
    return any(run.error for run in runs) or any(a.errors or a.scenario_failures or a.disagree for a in found)
