"""The prescriptions report: per GEMM and hazard, the cheapest verified cure and its cost, the other
verified cures, and the cures that failed with what the verification saw."""

from __future__ import annotations

from ..base.words import plural, table, wrapped
from .text import cure_cost, label

ITEM = " " * 6  # a line under a GEMM: its rest indented under its first words


def render_prescriptions(prescriptions, sm_count: int, fleet=(), problems=(), kernels: bool = False) -> str:
    lines = wrapped("Prescriptions: for each GEMM and hazard that changed its bits, the cures verified bitwise "
                    "against that hazard, and what each costs (graph time against the configuration it "
                    "replaces: median and 95% interval; + is slower)", indent="    ")
    lines += wrapped((f"not judged: {problem}" for problem in problems), indent=ITEM, first="  ")
    if not prescriptions:
        return "\n".join(lines + ["", "No hazard changed the bits of these GEMMs: nothing to cure."
                                   + (" (but see 'not judged' above)" if problems else "")])
    for p in prescriptions:
        best = p.best
        items = [f"cure: {best.label}: {best.evidence}; {cure_cost(best)}; "
                 + ("keeps today's bits" if best.keeps_bits else "other bits than today's")] if best else [
            "no verified cure among those tried" + (" (below)" if p.cures else "")]
        for cure in (cure for cure in p.cures if cure is not best):
            if cure.verified:
                items.append(f"also: {cure.label}: {cure_cost(cure)}"
                             + (f"; brings in: {', '.join(map(label, cure.introduces))}" if cure.introduces else ""))
            else:
                items.append(f"untested: {cure.label}: {cure_cost(cure)}; {cure.evidence}" if cure.untested
                             else f"failed: {cure.label}: {cure.evidence}")
        lines += ["", f"{p.shape.name} ({p.shape.spec})  {p.config.name}  {label(p.hazard)}"]
        lines += wrapped(items, indent=ITEM, first="  ")
    uncured = sum(p.best is None for p in prescriptions)
    cured = len(prescriptions) - uncured
    checked = [count for count in fleet if count <= sm_count]
    tally = (f"{cured} of {plural(len(prescriptions), 'hazard')} cured by a verified configuration"
             + (f"; {uncured} with none among those tried" if uncured else "")
             + f" (verified on this {sm_count}-SM GPU, smaller GPUs emulated by SM-count targets"
             + (f", the fleet's {', '.join(map(str, checked))} among them" if checked else "") + ")")
    lines += ["", *wrapped(tally, indent="    ")]
    if not kernels and any(not c.verified and not c.untested and c.config is not None
                           for p in prescriptions for c in p.cures):
        lines += wrapped("--kernels adds to each failed cure the kernel change behind it", indent="    ")
    return "\n".join(lines)


def _lock_cost(entry) -> str:
    cost = (entry.cost or {}).get("against_heuristic")
    if not cost:
        return "not timed"
    return f"{cost['median']:.3f} [{cost['ci_low']:.3f}, {cost['ci_high']:.3f}]"


def render_lock(lock, written, refused) -> str:
    """What ``--prescribe --lock`` wrote: the answer, then a line per GEMM locked and why others were not."""
    where = lock.where
    lines = wrapped(f"Lock {lock.path}: {plural(len(written), 'GEMM')} locked now, {len(lock.entries)} in the file, "
                    f"{len(refused)} could not be locked")
    lines += wrapped(f"holds on {where['gpu']} ({where['sm_count']} SMs, compute {where['compute_capability']}), "
                     f"cuBLAS {where['cublas_version']}; each GEMM pinned to one cuBLASLt algorithm (M: any M)",
                     indent="    ", first="  ") + [""]
    rows = [("GEMM", "from", "rows checked", "time vs heuristic")]
    for entry in written:
        checked = f"1 ... {entry.verified['m']}" if entry.verified.get("rows") else f"M = {entry.verified['m']} only"
        rows.append((str(entry.key), entry.source, checked, _lock_cost(entry)))
    lines += table(rows, indent="  ")
    if refused:
        lines += ["", "Not locked (their bits still change, pinned; they run as before):"]
        lines += wrapped(refused, indent=ITEM, first="  ")
    lines += ["", *wrapped(f"Apply it: cublas-det run --lock {lock.path} -- python train.py  "
                           "(or cublas_det.torch.lock)")]
    return "\n".join(lines)
