"""Per-device sweep: the same GEMMs on every GPU of a host, and whether their bits agree.

On a node of identical GPUs (same architecture and SM count) every device must give the same
digest; one that disagrees points at a fault or another SKU. One worker process per device computes
the digests, so the devices run at once and a crash on one never hides the others' results.
"""

from __future__ import annotations

import dataclasses
import os
import time

from ..bits.digest import digest_groups
from ..config import GemmConfig
from ..device import describe_machine
from ..shapes import GemmShape
from ..words import plural
from .results import Kind
from .worker.parent import INTERRUPTED, WORKER_TIMEOUT_S, collect, kill_all, spawn
from .worker.protocol import Request, Task, task_key


@dataclasses.dataclass(frozen=True)
class DeviceRun:
    """What one device's worker returned: its provenance and a :class:`TaskAnswer` per task key."""

    device_id: int
    provenance: dict = dataclasses.field(default_factory=dict)  # fingerprint() on that device
    results: dict = dataclasses.field(default_factory=dict)  # task key -> TaskAnswer
    error: str | None = None  # the worker as a whole failed (crash, timeout)
    elapsed_s: float = 0.0

    @property
    def name(self) -> str:
        return self.provenance.get("gpu", {}).get("name", "?")

    def describe(self) -> str:
        """``NVIDIA H200, cc 9.0, 132 SMs, PCI ..., cuBLAS 13.1.0, driver 13.0``, or the error."""
        if self.error:
            return f"error: {self.error}"
        return describe_machine(self.provenance, ("gpu", "cc", "sm_count", "pci", "cublas", "driver"))

    def short(self) -> str:
        """``device 1 (NVIDIA H200, 132 SMs, cuBLAS 13.1.0)`` for naming a device that differs."""
        return f"device {self.device_id} ({describe_machine(self.provenance, ('gpu', 'sm_count', 'cublas'))})"


@dataclasses.dataclass(frozen=True)
class Agreement:
    """One shape in one configuration across the devices: their digests, errors, and what each device's
    own scenarios found (guarantee failures apart from hazard findings)."""

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


def parse_devices(values: list[str] | str, count: int | None) -> list[int]:
    """``all`` or device ids (``0,1`` / ``0 1``) -> ids, checked against the ``count`` visible devices
    (``None``: the syntax only, and ``all`` gives []). ValueError names the bad id and those that exist."""
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
        if device not in devices:
            devices.append(device)
    return devices


def run_sweep(shapes: list[GemmShape], configs: list[GemmConfig], devices: list[int], *, scenarios=(),
              repeats: int = 20, seed: int = 0, on_device=None, timeout_s: float = WORKER_TIMEOUT_S) -> list[DeviceRun]:
    """Run every shape in every configuration on each device, one worker process per device, all at once.

    ``scenarios`` (in-process ones, such as ``repeat``) also run inside each worker. ``on_device(run)``
    is called as each worker is collected. Returns one :class:`DeviceRun` per device, in the order
    given; on Ctrl-C the devices not yet collected carry the error :data:`INTERRUPTED`.
    """
    tasks = tuple(Task(shape, config, seed) for shape in shapes for config in configs)
    env = dict(os.environ)
    started = time.perf_counter()
    workers: dict = {}
    runs = []
    try:
        for device in devices:  # inside the try: a failure to start one never leaves the others running
            workers[device] = spawn(Request(device, tasks, tuple(scenarios), repeats), env)
        for device, process in workers.items():
            answer, error = collect(process, timeout_s)
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
    """Per shape and configuration, what each device gave: only a guarantee scenario that gave other
    bits counts against a device; a hazard that changed bits is a finding, a comparison neither."""
    found = []
    for shape in shapes:
        for config in configs:
            key = task_key(shape, config)
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
                    broke = [r.scenario for r in task.scenarios if r.kind is Kind.GUARANTEE and r.changed_bits]
                    if broke:
                        failures[run.device_id] = broke
                    changed = [r.scenario for r in task.scenarios if r.kind is Kind.HAZARD and r.changed_bits]
                    if changed:
                        findings[run.device_id] = changed
                    # Only a guarantee that could not run leaves the device's verdict open; a hazard's does not.
                    failed = [f"{r.scenario}: {r.error}" for r in task.scenarios if r.error and r.kind is Kind.GUARANTEE]
                    if failed:
                        errors[run.device_id] = "; ".join(failed)
            found.append(Agreement(shape, config, digests, errors, failures, findings, inputs))
    return found


def sweep_failed(runs: list[DeviceRun], found: list[Agreement]) -> bool:
    """Exit-1 condition: a device or task failed, devices disagree, or a device broke a guarantee itself."""
    return any(run.error for run in runs) or any(a.errors or a.scenario_failures or a.disagree for a in found)
