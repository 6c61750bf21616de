"""The timing parts of the terminal report: what the times include, how each shape was timed, and
the warnings that say when a timing cannot be taken at its word."""

from __future__ import annotations

from ..timing.monitor import SLOWDOWN_REASONS
from ..timing.rounds import MAX_REDOS, THROTTLE_FRACTION
from ..base.words import plural, size

TIME_NOTE = "95% intervals hold within this run; --compare allows for drift between runs (docs/method.md)."
KERNEL_NOTE = "kernel µs: the summed durations of a GEMM's kernels in graph replays (CUPTI)."
NOT_TRUSTED = " (not trusted)"


def how_timed(timing) -> str:
    """How a shape was timed (--verbose): batch, buffers, rounds, visits, stop, redone rounds, clock, A/A."""
    visits = timing.options.get("visits")
    parts = [f"{timing.calls_per_batch} GEMMs/batch", plural(timing.buffer_sets, "buffer set"),
             plural(timing.rounds, "round") + (f" in {plural(visits, 'visit')}" if visits else "")]
    if timing.stop_reason:
        parts.append(f"stop: {timing.stop_reason}")
    if timing.discards.redone:
        parts.append(f"{timing.discards.redone} redone")
    if timing.clock_range_mhz:
        low, high = timing.clock_range_mhz
        parts.append(f"SM {low:.0f} MHz" if round(low) == round(high) else f"SM {low:.0f}-{high:.0f} MHz")
    if timing.aa_ratio:
        parts.append(f"A/A {timing.aa_ratio.median:.3f}")
    return ", ".join(parts)


def shape_warnings(name: str, timing) -> list[str]:
    notes = []
    if not timing.trusted:
        notes.append(f"{name}: ratios not trusted: {timing.untrusted_reason}")
    floor = f"{timing.clock_floor_mhz:.0f} MHz" if timing.clock_floor_mhz else "the floor"
    causes = {"throttled": (f"SM clock below {floor} ({THROTTLE_FRACTION:.0%} of the default) in {{}}",
                            f"after {MAX_REDOS} redos (their times are at a low clock)"),
              "unheld": ("the blocking kernel let go before the batch was queued in {} (a stalled host)",
                         "with launch latency inside")}
    for cause, (seen, kept_note) in causes.items():
        redone, kept = getattr(timing.discards, cause), getattr(timing.discards, "kept_" + cause)
        if redone or kept:
            notes.append(f"{name}: {seen.format(plural(redone + kept, 'round'))}: {redone} redone"
                         + (f", {kept} kept {kept_note}" if kept else ""))
    return notes


def busy_warning(gpu_state: dict | None, shapes) -> str | None:
    """One line naming the other processes seen on the GPU before or during timing, or None."""
    phases = [(gpu_state or {}).get(phase) or {} for phase in ("before", "during")]
    seen = {}
    for activity in (activity for activity in phases if activity.get("other_count")):
        for process in activity.get("other_processes", []):
            seen.setdefault(process["pid"], process)
    if not seen:
        return None
    described = []
    for process in seen.values():
        text = f"pid {process['pid']}" + (f" ({process['name']})" if process.get("name") else "")
        if process.get("used_mib") is not None:
            text += " " + size(process["used_mib"] * 2**20, "GiB", places=1)
        if process.get("sm_util") is not None:
            text += f" up to {process['sm_util']}% SM"
        described.append(text)
    timed = [r.shape.name for r in shapes if r.timing is not None and r.timing.gpu_activity is not None
             and r.timing.gpu_activity.busy]
    line = "another process used the GPU while timing ran: " + "; ".join(described)
    if any(activity.get("ambiguous_pids") for activity in phases):
        line += " (PIDs of another namespace: one of them is this process)"
    if timed:
        line += (f"; present while timing {plural(len(timed), 'shape')} (e.g. {', '.join(timed[:3])}): their times "
                 "are suspect")
    return line


def slowdown_warning(gpu_state: dict | None) -> str | None:
    during = (gpu_state or {}).get("during") or {}
    slowed = [r for r in during.get("clock_event_reasons", []) if r in SLOWDOWN_REASONS]
    return f"NVML reported clock slowdowns while timing ran: {', '.join(slowed)}" if slowed else None


def timing_warnings(result) -> list[str]:
    gpu_state = result.provenance.get("gpu_state")
    notes = [line for line in (busy_warning(gpu_state, result.shapes), slowdown_warning(gpu_state)) if line]
    for report in result.shapes:
        if report.timing is not None:
            notes += shape_warnings(report.shape.name, report.timing)
    return notes
