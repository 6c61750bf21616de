"""What a capture says about how the program calls cuBLAS: findings, each naming the handles and
streams involved.

A finding's kind is ``hazard`` (a condition under which cuBLAS's documented reproducibility does
not apply: a handle shared by streams or threads, split-K that depends on the SM count),
``precision`` (arithmetic below fp32's: TF32, reduced-precision reductions), or ``setup`` (handles
that differ, a small workspace). Findings describe the calls; none is a check of the bits.
"""

from __future__ import annotations

import dataclasses

from .. import words
from .._cublas import MATH_MODE_FLAGS as DISALLOW_RPR, MathMode
from ..config import HOPPER_WORKSPACE_BYTES, math_mode_name
from .model import Capture

OTHER_WORKSPACE = 4 << 20  # cuBLAS's recommended workspace before Hopper
_REDUCED_COMPUTE = ("COMPUTE_32F_FAST_TF32", "COMPUTE_32F_FAST_16F", "COMPUTE_32F_FAST_16BF", "COMPUTE_16F",
                    "COMPUTE_16F_PEDANTIC")
_HALF = ("R_16F", "R_16BF")


@dataclasses.dataclass(frozen=True)
class Finding:
    id: str
    kind: str  # hazard, precision, setup
    text: str
    handles: tuple = ()
    streams: tuple = ()
    gemms: tuple = ()  # ids of the GEMMs concerned

    def to_dict(self) -> dict:
        return {"id": self.id, "kind": self.kind, "text": self.text, "handles": list(self.handles),
                "streams": list(self.streams), "gemms": list(self.gemms)}


def _mib(n: int | None) -> str:
    return "cuBLAS's own" if n is None else words.size(n, "MiB")


def findings(capture: Capture, ids: dict, compute_capability: int | None = None) -> list[Finding]:
    """The findings of ``capture``; ``ids`` maps each GemmDefinition to its id (``g1`` ...)."""
    found = []
    handles = capture.handles()
    for handle in handles.values():
        where = f"handle {handle.handle}" + (f" of process {handle.process}" if handle.process is not None else "")
        if len(handle.streams) > 1:
            streams = tuple(sorted(handle.streams))
            own = all(len(handle.stream_workspaces.get(s, ())) == 1 for s in streams) and len(
                set().union(*(handle.stream_workspaces.get(s, set()) for s in streams))) == len(streams)
            text = (f"{where} ran GEMMs on {len(streams)} streams ({', '.join(streams)}): cuBLAS documents "
                    "identical bits only with one stream per handle; ")
            config = capture.environment.get("CUBLAS_WORKSPACE_CONFIG")
            if own:
                text += "each stream had a workspace of its own (cuBLAS's documented remedy)"
            elif config:
                text += (f"CUBLAS_WORKSPACE_CONFIG={config} was set (it sizes cuBLAS's own pool, not a user "
                         "workspace); else give each stream its own handle or workspace")
            else:
                text += ("give each stream its own handle, or its own workspace (cublasSetWorkspace after each "
                         "cublasSetStream), or set CUBLAS_WORKSPACE_CONFIG=:4096:8")
            found.append(Finding("shared-handle-streams", "hazard" if not own else "setup", text,
                                 (handle.handle,), streams))
        if len(handle.threads) > 1:
            found.append(Finding("shared-handle-threads", "setup",
                                 f"{where} was used from {len(handle.threads)} threads (one after another, as "
                                 "PyTorch's handle pool does, or at once); cuBLAS recommends a handle per thread",
                                 (handle.handle,), tuple(sorted(handle.streams))))
    modes = {}
    spaces = {}
    for handle in handles.values():
        for mode in handle.math_modes:
            modes.setdefault(mode, []).append(handle.handle)
        for size in handle.workspaces:
            spaces.setdefault(size, []).append(handle.handle)
    if len(modes) > 1:
        found.append(Finding("mixed-math-modes", "setup", "handles ran GEMMs in different math modes: " + "; ".join(
            f"{math_mode_name(mode)} on {', '.join(sorted(set(hs)))}" for mode, hs in sorted(
                modes.items(), key=lambda item: -1 if item[0] is None else item[0])),
            tuple(sorted({h for hs in modes.values() for h in hs}))))
    if len(spaces) > 1:
        found.append(Finding("mixed-workspaces", "setup", "handles ran GEMMs with different workspaces: " + "; ".join(
            f"{_mib(size)} on {', '.join(sorted(set(hs)))}" for size, hs in sorted(
                spaces.items(), key=lambda item: -1 if item[0] is None else item[0])),
            tuple(sorted({h for hs in spaces.values() for h in hs}))))
    found += _per_gemm(capture, ids, compute_capability)
    return found


def _per_gemm(capture: Capture, ids: dict, compute_capability: int | None) -> list[Finding]:
    tf32, bf16x9, reduced, rpr, split, small = [], [], [], [], [], []
    handles = {key: set() for key in ("tf32", "bf16x9", "reduced", "rpr", "split", "small")}
    recommended = HOPPER_WORKSPACE_BYTES if (compute_capability or 0) >= 90 else OTHER_WORKSPACE
    for definition, stats in capture.gemms.items():
        gid = ids[definition]
        site_handles = {site.handle for site in stats.sites if site.handle}
        mode = definition.math_mode
        if definition.a_type == "R_32F" and mode is not None and definition.compute_type == "COMPUTE_32F":
            if mode & ~DISALLOW_RPR == MathMode.TF32:
                tf32.append(gid)
                handles["tf32"] |= site_handles
            elif mode & ~DISALLOW_RPR == MathMode.FP32_EMULATED_BF16X9:
                bf16x9.append(gid)
                handles["bf16x9"] |= site_handles
        if definition.compute_type in _REDUCED_COMPUTE:
            reduced.append(f"{gid} ({definition.compute_type})")
            handles["reduced"] |= site_handles
        if definition.a_type in _HALF and not definition.is_lt and mode is not None and not mode & DISALLOW_RPR:
            rpr.append(gid)
            handles["rpr"] |= site_handles
        algos = [dict(algo) for algo in ([definition.lt_algo] if definition.is_lt else stats.internal)]
        splits = sorted({f"numSplitsK={a.get('numSplitsK')} {a.get('reductionScheme', '')}".strip() for a in algos
                         if a.get("numSplitsK") not in (None, "0", "1") or a.get("reductionScheme", "REDUCTION_SCHEME_NONE")
                         not in ("REDUCTION_SCHEME_NONE",)})
        if splits:
            split.append(f"{gid} ({', '.join(splits)})")
            handles["split"] |= site_handles
        if not definition.is_lt and definition.workspace_bytes is not None and definition.workspace_bytes < recommended:
            small.append(f"{gid} ({_mib(definition.workspace_bytes)})")
            handles["small"] |= site_handles
    found = []

    def add(key, kind, items, involved, text):
        if items:
            found.append(Finding(key, kind, f"{text}: {', '.join(items)}", tuple(sorted(involved)), (),
                                 tuple(item.split(" ")[0] for item in items)))

    add("tf32-math", "precision", tf32, handles["tf32"], "fp32 GEMMs ran under TF32 math: 10-bit mantissa products, "
        "not fp32's")
    add("bf16x9-math", "precision", bf16x9, handles["bf16x9"], "fp32 GEMMs ran under BF16X9 math: fp32 emulated with "
        "bf16 products on tensor cores, other bits than fp32's")
    add("reduced-compute", "precision", reduced, handles["reduced"], "GEMMs asked for a compute type below fp32's")
    add("rpr-allowed", "precision", rpr, handles["rpr"], "half-precision GEMMs on handles that allow reduced-precision reductions "
        "(no CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)")
    add("split-k", "hazard", split, handles["split"], "cuBLASLt chose split-K or a reduction scheme, whose split depends on the SM "
        "count and the workspace")
    add("small-workspace", "setup", small, handles["small"], f"workspaces below cuBLAS's recommended {_mib(recommended)}"
        + ("" if compute_capability else " (the GPU is unknown: the pre-Hopper figure)"))
    return found
