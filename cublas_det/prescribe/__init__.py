"""Prescriptions: for every GEMM whose bits a hazard changed, the cures (:func:`candidates`: cuBLASLt
variants, BF16X9 math; each hazard's setup cures), each verified (the hazard's scenario gives identical
bits and its own bits repeat) and timed against the configuration it replaces."""

from __future__ import annotations

import dataclasses

from ..bindings.cublas import ComputeType, CublasError, MathMode
from ..core.key import GemmKey
from ..check import check_many
from ..check.cures import Cure, Prescription, interval, judged, lt_config, setup_cures
from ..check.scenarios import HAZARDS, REGISTRY, without_workers
from ..core.config import GemmConfig
from ..core.device import device_properties
from ..core.handle import create_handle
from ..lock.file import LockEntry
from ..core.shapes import GemmShape, batch_ladder, sm_count_ladder
from ..timing import time_shapes

VERIFY_SCENARIOS = ("repeat",) + HAZARDS
# The guarantee scenarios that check a hazard's setup cures (no other GEMM: no time cost).
SETUP_SCENARIOS = tuple(name for hazard in HAZARDS for name, _ in REGISTRY[hazard].setup_cures)
BASE_SCENARIOS = ("repeat",) + SETUP_SCENARIOS + HAZARDS


def verification_targets(sm_count: int, fleet=()) -> tuple:
    """SM counts to verify under: 16 up to the device's, and every SM count of the fleet."""
    return tuple(sm_count_ladder(sm_count, also=(16, 33, *fleet)))


def pinned_algorithm(shape: GemmShape, config: GemmConfig) -> tuple:
    """The algorithm cuBLASLt's heuristic picks for ``shape`` at the full SM count."""
    lt = lt_config(config)
    definition = GemmKey.of(shape, lt, any_m=False).packed(shape.batch)
    with create_handle(lt) as handle:
        return handle.lt.algorithm(definition)


def candidates(shape: GemmShape, config: GemmConfig, fleet=()) -> list[tuple[str, GemmConfig | str]]:
    """The configurations to try in place of ``config`` for ``shape`` (or why one cannot be made)."""
    if config.math_mode is MathMode.FP32_EMULATED_BF16X9:  # cuBLASLt has no BF16X9 math, and it is BF16X9 already
        return []
    found = []
    try:
        found.append(("pin the cuBLASLt algorithm", lt_config(config, lt_algo=pinned_algorithm(shape, config))))
    except CublasError as err:
        found.append(("pin the cuBLASLt algorithm", f"cuBLASLt has no algorithm for it ({err})"))
    found.append(("cuBLASLt without split-K (reduction scheme NONE)", lt_config(config, lt_reduction_scheme_mask=0)))
    if fleet:
        found.append((f"cuBLASLt planning for {min(fleet)} SMs", lt_config(config, lt_sm_count_target=min(fleet))))
    if config.input_dtype == "float32" and config.compute_type is ComputeType.COMPUTE_32F:
        found.append(("BF16X9 math", dataclasses.replace(config, math_mode=MathMode.FP32_EMULATED_BF16X9)))
    return found


@dataclasses.dataclass(frozen=True)
class CurePlan:
    """What to verify for one shape: the hazards its checks found, and the cures to try."""

    shape: GemmShape
    hazardous: tuple  # (a configuration's check, a hazard that changed its bits)
    tried: dict  # (configuration name, cure name) -> (label, cure configuration, the configuration's check)
    impossible: dict  # configuration name -> [Cure that could not be made, and why]

    @property
    def cure_configs(self) -> list[GemmConfig]:
        return list(dict.fromkeys(cure for _, cure, _ in self.tried.values()))


def plan_cures(shape: GemmShape, checks, fleet=(), candidates_of=candidates) -> CurePlan:
    """The cures to try for each hazard the checks of ``shape`` found."""
    hazardous = tuple((c, r.scenario) for c in checks for r in c.findings if r.scenario in HAZARDS)
    tried, impossible = {}, {}
    for check in {c.config.name: c for c, _ in hazardous}.values():
        for label, cure in candidates_of(shape, check.config, fleet):
            if isinstance(cure, str):
                impossible.setdefault(check.config.name, []).append(Cure(label, None, False, cure))
            else:
                tried.setdefault((check.config.name, cure.name), (label, cure, check))
    return CurePlan(shape, hazardous, tried, impossible)


def verify_cures(plan: CurePlan, verified: dict, targets) -> list[Prescription]:
    """A :class:`Prescription` per hazard of ``plan``, from the cures' checks by name."""
    cures = {}  # (configuration name, hazard) -> [Cure]
    for (base_name, cure_name), (label, cure, check) in plan.tried.items():
        cure_check = verified[cure_name]
        base_hazards = {h for c, h in plan.hazardous if c.config.name == base_name}
        introduces = tuple(r.scenario for r in cure_check.findings if r.scenario not in base_hazards)
        for hazard in sorted(base_hazards):
            cures.setdefault((base_name, hazard), []).append(
                judged(label, cure, hazard, check, cure_check, introduces, targets))
    return [Prescription(plan.shape, check.config, hazard, tuple(
        cures.get((check.config.name, hazard), []) + plan.impossible.get(check.config.name, [])
        + setup_cures(check, hazard))) for check, hazard in plan.hazardous]


def problems_of(checks) -> list[str]:
    """The configurations' own failures (errors, failed guarantees)."""
    return [f"{c.shape.name} {c.mode_name}: {c.error or '; '.join(map(str, c.errors + c.guarantee_failures))}"
            for c in checks if c.error or c.errors or c.guarantee_failures]


def _verification(shapes, configs, targets, seed, repeats, operands, **options) -> list:
    return check_many(shapes, configs, repeats=repeats, scenarios=list(VERIFY_SCENARIOS), seed=seed,
                      operands=operands, sm_count_targets=targets, **options)


def prescribe(shapes, configs, *, fleet=(), seed: int = 0, repeats: int = 5, quick: bool = False,
              operands=None, on_step=None, timing: dict | None = None,
              kernels: bool = False) -> tuple[list[Prescription], list[str]]:
    """A :class:`Prescription` for every (shape, configuration, hazard) whose bits changed, and
    :func:`problems_of` the checks. ``timing``: ``time_shapes`` options; ``on_step(text)``: progress;
    ``kernels``: record the cures' kernels, so a failed cure's evidence names the kernel change."""
    step = on_step or (lambda text: None)
    targets = verification_targets(device_properties()["sm_count"], fleet)
    base = check_many(shapes, configs, repeats=repeats, seed=seed, operands=operands, sm_count_targets=targets,
                      scenarios=list(without_workers(BASE_SCENARIOS) if quick else BASE_SCENARIOS),
                      on_check=lambda c: step(f"checked {c.shape.name} {c.mode_name}"))
    found = []
    for shape in shapes:
        plan = plan_cures(shape, [c for c in base if c.shape.name == shape.name and not c.error], fleet)
        if plan.hazardous:
            step(f"verifying {len(plan.cure_configs)} cures of {shape.name}")
            checks = _verification([shape], plan.cure_configs, targets, seed, repeats, operands, kernels=kernels)
            found += verify_cures(plan, {c.mode_name: c for c in checks}, targets)
    return time_cures(found, seed, operands, step, timing or {}), problems_of(base)


def time_cures(found: list[Prescription], seed, operands, step, timing: dict) -> list[Prescription]:
    """Each verified cure's time against the configuration it replaces (graph timing, side by side)."""
    arms: dict = {}  # shape name -> (shape, {base name: {name: configuration}}), the base first
    for prescription in found:
        shape, bases = arms.setdefault(prescription.shape.name, (prescription.shape, {}))
        group = bases.setdefault(prescription.config.name, {prescription.config.name: prescription.config})
        for cure in prescription.cures:
            if (cure.verified or cure.untested) and cure.config is not None:
                group.setdefault(cure.config.name, cure.config)
    ratios = {}
    for name, (shape, bases) in arms.items():
        step(f"timing {name}: {len({n for group in bases.values() for n in group})} configurations")
        for base, group in bases.items():
            if len(group) < 2:
                continue
            run = time_shapes([shape], list(group.values()), seed=seed, operands=operands, **timing)
            shape_timing = run.timings.get(shape.name)
            for arm in list(group)[1:]:
                ratios[(name, base, arm)] = shape_timing.ratio(arm, base) if shape_timing else None
    return [dataclasses.replace(p, cures=tuple(
        dataclasses.replace(c, ratio=ratios.get((p.shape.name, p.config.name, c.config.name)))
        if c.config is not None else c for c in p.cures)) for p in found]


def lock_entries(shapes, configs, *, fleet=(), seed: int = 0, repeats: int = 5, operands=None, on_step=None,
                 timing: dict | None = None) -> tuple[list[LockEntry], list[str]]:
    """A verified, graph-timed :class:`LockEntry` for each GEMM of ``shapes`` x ``configs`` (the heuristic's
    algorithm pinned, or its pick without split-K where that one's bits change, its bits repeating across
    ``verification_targets``: for any M where rows m < M match the full product too, else for its M; a shared
    handle recorded, not required), and why not for others."""
    step = on_step or (lambda text: None)
    targets = verification_targets(device_properties()["sm_count"], fleet)
    entries, refused, done = [], [], set()
    chosen: dict = {}  # key -> (shape, configuration, pinned configuration), for the timing
    for shape in sorted(shapes, key=lambda s: (-s.batch, -s.m)):  # per GEMM the largest batch, then M, is verified
        for config in configs:
            if config.math_mode is MathMode.FP32_EMULATED_BF16X9:  # cuBLASLt has no BF16X9 math
                refused.append(f"{shape.name} {config.name}: cuBLASLt has no BF16X9 math to pin")
                continue
            base = lt_config(config) if config.api != "lt" else dataclasses.replace(config, lt_algo=())
            key = GemmKey.of(shape, base)
            if key in done or key.at(shape.m) in done:
                continue
            entry, whys = None, []
            # The heuristic's own pick first (about 0% cost); where its bits change with the SM count even
            # pinned (a split-K or stream-K kernel), its pick without split-K.
            for why, asked in (("", base), (" without split-K", lt_config(base, lt_reduction_scheme_mask=0))):
                try:
                    pinned = dataclasses.replace(base, lt_algo=pinned_algorithm(shape, asked))
                except CublasError as err:
                    whys.append(f"cuBLASLt has no algorithm{why} for it ({err})")
                    continue
                step(f"verifying {shape.name} {pinned.name}")
                check = _verification([shape], [pinned], targets, seed, repeats, operands)[0]
                entry, refusal = _lock_entry(shape, key, pinned, check, targets, repeats)
                if entry is not None:
                    break
                whys.append(f"pinned{why}, its bits still change ({refusal})")
            if entry is None:
                refused.append(f"{shape.name} {config.name}: {'; '.join(whys)}")
                done.add(key.at(shape.m))
                continue
            done.add(entry.key)
            entries.append(entry)
            chosen[entry.key] = (shape, config, pinned)
    return _lock_costs(entries, chosen, seed, operands, step, timing or {}), refused


def _lock_entry(shape, key, pinned, check, targets, repeats) -> tuple[LockEntry | None, str]:
    parts = [(getattr(REGISTRY.get(r.scenario), "lock", ""), r) for r in check.scenarios]  # Scenario.lock
    failed = [r for part, r in parts if part == "bits" and (r.changed_bits or r.error)]
    if check.error or failed or not check.reproducible:
        return None, check.error or "; ".join(f"{r.scenario}: {r.error or r.detail}" for r in failed) or \
            check.verdict.value
    rows, shared = (dict(parts).get(part) for part in ("rows", "workspace"))
    by_batch = ((rows.extra or {}) if rows else {}).get("mismatched_by_batch", {})
    if any(by_batch.values()):  # one entry serves every batch count: this pin does not
        differ = [count for count, mismatched in by_batch.items() if mismatched]
        return None, f"the first b matrices differ from the full batch's for b = {differ}"
    any_m = bool(rows and rows.identical and (rows.extra or {}).get("mismatched_by_m"))  # rows were checked
    verified = {"m": shape.m, "rows": batch_ladder(shape.m) if any_m else [], "batch": shape.batch,
                "batches": [int(b) for b in by_batch],
                "rows_note": "" if any_m else (rows.not_applicable or rows.error or rows.detail if rows else
                                               "not checked") + f"; holds for M = {shape.m} alone",
                "sm_count_targets": list(targets), "repeats": repeats,
                "shared_workspace": ("same bits" if shared.identical else "other bits: one workspace per stream")
                if shared and shared.compared else "not checked"}
    return LockEntry(key if any_m else key.at(shape.m), pinned, verified, None, shape.name), ""


def _lock_costs(entries, chosen, seed, operands, step, timing: dict) -> list[LockEntry]:
    """Each entry with its cost against the heuristic's pick (with an interval) and the configuration it replaces."""
    timed = []
    for entry in entries:
        shape, config, pinned = chosen[entry.key]
        heuristic = dataclasses.replace(pinned, lt_algo=())
        arms = list(dict.fromkeys((heuristic, pinned, config)))  # one math mode: the first is the reference
        step(f"timing {shape.name}: {len(arms)} configurations")
        shape_timing = time_shapes([shape], arms, seed=seed, operands=operands, **timing).timings.get(shape.name)
        pinned_ratio = shape_timing.ratio(pinned.name, heuristic.name) if shape_timing else None
        config_ratio = shape_timing.ratio(config.name, heuristic.name) if shape_timing and config != heuristic else None
        cost = None
        if pinned_ratio is not None:
            cost = {"against_heuristic": {"config": heuristic.name, **interval(pinned_ratio)}}
            if config_ratio is not None:
                cost["against"] = {"config": config.name, "median": pinned_ratio.median / config_ratio.median}
        timed.append(dataclasses.replace(entry, cost=cost))
    return timed
