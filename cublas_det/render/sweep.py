"""The device sweep's report: the devices, a row per shape and configuration, and a summary (its run
file is the store's: store.results.sweep_to_json)."""

from __future__ import annotations

from ..check.devices import Agreement, DeviceRun
from ..base.words import plural, report_width, table, wrapped


def _verdict(agreement: Agreement, devices: int) -> str:
    if not agreement.digests:
        return "no result"
    if agreement.disagree:
        return "NO"
    if agreement.errors:
        return f"partial ({len(agreement.digests)}/{devices} agree)"
    return "1 device only" if devices == 1 else f"yes ({devices}/{devices})"


def render_sweep(runs: list[DeviceRun], found: list[Agreement], width: int | None = None) -> str:
    """The devices, then a row per shape and mode: do the devices agree, on which digest, who differs; its prose
    as wide as every report (``report_width()``)."""
    width = width or report_width()
    devices = (f"{run.device_id}: {run.describe()}" + ("" if run.error else f" ({run.elapsed_s:.1f} s)")
               for run in runs)
    lines = ["Devices", *wrapped(devices, width, first="  ", indent="    ")]
    by_id = {run.device_id: run for run in runs}
    rows = [["shape", "mode", "devices agree", "digest", "differs / missing"]]
    for agreement in found:
        notes = [by_id[d].short() + f": {agreement.digests[d][:12]}" for d in agreement.outliers]
        notes += [f"device {d}: " + ("no results (see Devices)" if by_id[d].error else error)
                  for d, error in sorted(agreement.errors.items())]
        notes += [f"device {d} broke a guarantee: {', '.join(s)}" for d, s in sorted(
            agreement.scenario_failures.items())]
        rows.append([agreement.shape.name, agreement.mode_name, _verdict(agreement, len(runs)),
                     (agreement.majority or "-")[:12], "; ".join(notes)])
    lines += ["", *table(rows), "", "Summary"]
    lines += wrapped(sweep_summary(runs, found), width, first="  ", indent="    ")
    return "\n".join(lines)


def sweep_summary(runs: list[DeviceRun], found: list[Agreement]) -> list[str]:
    lines = [f"device {run.device_id} gave no results: {run.error}" for run in runs if run.error]
    for run in (run for run in runs if not run.error):
        missing = [a for a in found if run.device_id in a.errors]
        if missing:
            lines.append(f"device {run.device_id} could not run {plural(len(missing), 'shape/mode pair')}, e.g. "
                         f"{missing[0].shape.name} {missing[0].mode_name}: {missing[0].errors[run.device_id]}")
    if len(runs) == 1:
        lines.append("one device: nothing to compare across devices; its digests go into --json for "
                     "--compare with other hosts")
    differing = [a for a in found if a.disagree]
    if len(runs) > 1 and found and not differing and not any(a.errors for a in found):
        lines.append(f"all {len(runs)} devices gave identical bits for all {len(found)} shape/mode pairs")
    for agreement in differing:
        who = ", ".join(f"device {d}" for d in agreement.outliers)
        differ = "differs" if len(agreement.outliers) == 1 else "differ"
        lines.append(f"{agreement.shape.name} {agreement.mode_name}: {who} {differ} from the other devices")
    names = {(run.name, run.provenance.get("gpu", {}).get("sm_count"), run.provenance.get("cublas_version"))
             for run in runs if not run.error}
    if differing and len(names) > 1:
        lines.append("the devices are not alike (name, SM count or cuBLAS version differ): cuBLAS does not "
                     "promise the same bits across them")
    for device in sorted({d for a in found for d in a.scenario_failures}):
        broken = sorted({s for a in found for s in a.scenario_failures.get(device, [])})
        lines.append(f"device {device} broke a guarantee: other bits under {', '.join(broken)} (documented as "
                     "reproducible)")
    for device in sorted({d for a in found for d in a.findings}):
        changed = sorted({s for a in found for s in a.findings.get(device, [])})
        count = sum(device in a.findings for a in found)
        lines.append(f"finding on device {device}: bits changed under {plural(len(changed), 'hazard')} "
                     f"({', '.join(changed)}) in {plural(count, 'shape/mode pair')}, as cuBLAS warns")
    return lines
