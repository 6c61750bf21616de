"""How a run compares with a baseline JSON written by ``--json``: bits, then time."""

from __future__ import annotations

import json


def load_baseline(path: str) -> dict:
    """Read a JSON written by ``--json``; OSError/ValueError with one line on trouble."""
    try:
        with open(path) as file:
            data = json.load(file)
    except json.JSONDecodeError as err:
        raise ValueError(f"--compare {path}: not JSON ({err})") from None
    if not isinstance(data, dict) or "benchmarks" not in data:
        raise ValueError(f"--compare {path}: not a cublas_det --json file (no 'benchmarks')")
    return data


def _digests(bench: dict) -> set:
    """Every digest an entry holds: one per device for a sweep (--devices), else the one digest."""
    info = bench.get("extra_info", {})
    per_device = info.get("device_digests")
    if per_device:
        return set(per_device.values())
    return {info["digest"]} if info.get("digest") else set()


def compare(baseline: dict, current: dict, fail_on_pct: float | None) -> tuple[list[str], bool]:
    """Bits and times of the shapes present in both runs. Returns (lines, failed).

    Bits are identical when both runs hold one and the same digest, whichever devices computed it
    (a --devices sweep holds one per device), so sweeps of two hosts compare like single runs.
    """
    base = {b["name"]: b for b in baseline.get("benchmarks", [])}
    lines, failed = [], False
    base_gpu = baseline.get("machine_info", {}).get("gpu", {}).get("name", "?")
    lines.append(f"against {base_gpu}, cuBLAS {baseline.get('machine_info', {}).get('cublas_version', '?')}, "
                 f"{baseline.get('datetime', '?')}")
    matched = 0
    for bench in current.get("benchmarks", []):
        old = base.get(bench["name"])
        if old is None:
            continue
        matched += 1
        old_digests, new_digests = _digests(old), _digests(bench)
        bits = ("no digest" if not (old_digests and new_digests) else
                "identical bits" if old_digests == new_digests and len(new_digests) == 1 else "bits DIFFER")
        if bits == "bits DIFFER":
            failed = True
        devices = [len(b["extra_info"].get("device_digests") or {}) for b in (bench, old)]
        if any(devices):
            bits += f" ({devices[0]} device(s) here, {devices[1]} in the baseline)"
        timing = ""
        if old.get("stats") and bench.get("stats"):
            change = (bench["stats"]["median"] / old["stats"]["median"] - 1) * 100
            timing = f", time {change:+.1f}%"
            if fail_on_pct is not None and change > fail_on_pct:
                timing += f" REGRESSION (> {fail_on_pct:g}%)"
                failed = True
        lines.append(f"{bench['name']}: {bits}{timing}")
    if matched == 0:
        lines.append("no shape/mode in common with the baseline")
    return lines, failed
