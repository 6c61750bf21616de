"""What a capture says about how the program calls cuBLAS, naming handles and streams: a ``hazard`` (cuBLAS's
documented reproducibility does not apply), ``precision`` (below fp32) or ``setup`` finding; none checks bits."""

from __future__ import annotations

import collections
import dataclasses

from ..base import words
from ..bindings.cublas import MATH_MODE_FLAGS, MathMode
from ..core.config import HOPPER_WORKSPACE_BYTES, math_mode_name
from ..base.dtypes import ELEMENT_TYPES
from .model import Capture

OTHER_WORKSPACE = 4 << 20  # cuBLAS's recommended workspace before Hopper
_REDUCED_COMPUTE = ("COMPUTE_32F_FAST_TF32", "COMPUTE_32F_FAST_16F", "COMPUTE_32F_FAST_16BF", "COMPUTE_16F",
                    "COMPUTE_16F_PEDANTIC")
_HALF = {t.cuda_name for t in ELEMENT_TYPES.values() if t.is_float and t.itemsize == 2}  # R_16F, R_16BF
_FP32_MODES = {MathMode.TF32: "tf32-math", MathMode.FP32_EMULATED_BF16X9: "bf16x9-math"}  # fp32 not computed as fp32
# Every finding's id and kind; docs/capture.md's table is held to it (tests/test_docs.py).
KINDS = {"shared-handle-streams": "hazard",  # setup where each stream had a workspace of its own
         "shared-handle-threads": "setup", "mixed-math-modes": "setup", "mixed-workspaces": "setup",
         "tf32-math": "precision", "bf16x9-math": "precision", "reduced-compute": "precision",
         "rpr-allowed": "precision", "split-k": "hazard", "small-workspace": "setup"}


@dataclasses.dataclass(frozen=True)
class Finding:
    id: str
    kind: str  # hazard, precision, setup
    text: str
    handles: tuple = ()
    streams: tuple = ()
    gemms: tuple = ()  # ids of the GEMMs concerned

    def to_dict(self) -> dict:
        return {key: list(value) if isinstance(value, tuple) else value for key, value in vars(self).items()}


def _mib(n: int | None) -> str:
    return "cuBLAS's own" if n is None else words.size(n, "MiB")


def major(compute_capability: str | int | None) -> int | None:
    """The major version of a compute capability in the device's form (``"9.0"``: 9); an int (``90``), the
    form captures once took it in, reads alike."""
    if compute_capability is None or compute_capability == "":
        return None
    if isinstance(compute_capability, int):
        return compute_capability // 10
    return int(compute_capability.partition(".")[0])


def findings(capture: Capture, ids: dict, compute_capability: str | int | None = None) -> list[Finding]:
    """The findings of ``capture``; ``ids`` maps each GemmDefinition to its id (``g1`` ...); ``compute_capability``:
    the local GPU's, as the device gives it (``"9.0"``), None without one."""
    found = []
    handles = capture.handles()
    for handle in handles.values():
        where = f"handle {handle.handle}" + (f" of process {handle.process}" if handle.process is not None else "")
        if len(handle.streams) > 1:
            streams = tuple(sorted(handle.streams))
            addresses = [handle.stream_workspaces.get(stream, set()) for stream in streams]
            own = all(len(a) == 1 for a in addresses) and len(set().union(*addresses)) == len(streams)
            config = capture.environment.get("CUBLAS_WORKSPACE_CONFIG")
            text = (f"{where} ran GEMMs on {len(streams)} streams ({', '.join(streams)}): cuBLAS documents "
                    "identical bits only with one stream per handle; " + (
                        "each stream had a workspace of its own (cuBLAS's documented remedy)" if own else
                        f"CUBLAS_WORKSPACE_CONFIG={config} was set (it sizes cuBLAS's own pool, not a user "
                        "workspace); else give each stream its own handle or workspace" if config else
                        "give each stream its own handle, or its own workspace (cublasSetWorkspace after each "
                        "cublasSetStream), or set CUBLAS_WORKSPACE_CONFIG=:4096:8"))
            found.append(Finding("shared-handle-streams", "setup" if own else KINDS["shared-handle-streams"], text,
                                 (handle.handle,), streams))
        if len(handle.threads) > 1:
            found.append(Finding("shared-handle-threads", KINDS["shared-handle-threads"],
                                 f"{where} was used from {len(handle.threads)} threads (one after another, as "
                                 "PyTorch's handle pool does, or at once); cuBLAS recommends a handle per thread",
                                 (handle.handle,), tuple(sorted(handle.streams))))
    for finding, what, values, name in (("mixed-math-modes", "in different math modes", "math_modes", math_mode_name),
                                        ("mixed-workspaces", "with different workspaces", "workspaces", _mib)):
        by_value = {}  # a math mode or workspace size -> the handles that ran GEMMs with it
        for handle in handles.values():
            for value in getattr(handle, values):
                by_value.setdefault(value, set()).add(handle.handle)
        if len(by_value) > 1:
            found.append(Finding(finding, KINDS[finding], f"handles ran GEMMs {what}: " + "; ".join(
                f"{name(value)} on {', '.join(sorted(hs))}" for value, hs in sorted(
                    by_value.items(), key=lambda item: -1 if item[0] is None else item[0])),
                tuple(sorted(set().union(*by_value.values())))))
    found += _per_gemm(capture, ids, compute_capability)
    return found


def _per_gemm(capture: Capture, ids: dict, compute_capability: str | int | None) -> list[Finding]:
    items, involved = collections.defaultdict(list), collections.defaultdict(set)  # finding -> GEMMs, handles
    recommended = HOPPER_WORKSPACE_BYTES if (major(compute_capability) or 0) >= 9 else OTHER_WORKSPACE
    for definition, stats in capture.gemms.items():
        gid = ids[definition]
        noted = []  # (finding, the GEMM as it lists it)
        mode = definition.math_mode
        if definition.a_type == "R_32F" and mode is not None and definition.compute_type == "COMPUTE_32F" \
                and mode & ~MATH_MODE_FLAGS in _FP32_MODES:
            noted.append((_FP32_MODES[mode & ~MATH_MODE_FLAGS], gid))
        if definition.compute_type in _REDUCED_COMPUTE:
            noted.append(("reduced-compute", f"{gid} ({definition.compute_type})"))
        if definition.a_type in _HALF and not definition.is_lt and mode is not None and not mode & MATH_MODE_FLAGS:
            noted.append(("rpr-allowed", gid))
        algos = [dict(algo) for algo in ([definition.lt_algo] if definition.is_lt else stats.internal)]
        splits = sorted({f"numSplitsK={a.get('numSplitsK')} {a.get('reductionScheme', '')}".strip() for a in algos
                         if a.get("numSplitsK") not in (None, "0", "1")
                         or a.get("reductionScheme", "REDUCTION_SCHEME_NONE") != "REDUCTION_SCHEME_NONE"})
        if splits:
            noted.append(("split-k", f"{gid} ({', '.join(splits)})"))
        if not definition.is_lt and definition.workspace_bytes is not None and definition.workspace_bytes < recommended:
            noted.append(("small-workspace", f"{gid} ({_mib(definition.workspace_bytes)})"))
        handles = {site.handle for site in stats.sites if site.handle}
        for finding, item in noted:
            items[finding].append(item)
            involved[finding] |= handles
    texts = (
        ("tf32-math", "fp32 GEMMs ran under TF32 math: 10-bit mantissa products, not fp32's"),
        ("bf16x9-math", "fp32 GEMMs ran under BF16X9 math: fp32 emulated with bf16 products on tensor "
         "cores, other bits than fp32's"),
        ("reduced-compute", "GEMMs asked for a compute type below fp32's"),
        ("rpr-allowed", "half-precision GEMMs on handles that allow reduced-precision reductions "
         "(no CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)"),
        ("split-k", "cuBLASLt chose split-K or a reduction scheme, whose split depends on the SM count and "
         "the workspace"),
        ("small-workspace", f"workspaces below cuBLAS's recommended {_mib(recommended)}"
         + ("" if compute_capability else " (the GPU is unknown: the pre-Hopper figure)")))
    return [Finding(finding, KINDS[finding], f"{text}: {', '.join(items[finding])}", tuple(sorted(involved[finding])),
                    (), tuple(item.split(" ")[0] for item in items[finding]))
            for finding, text in texts if items[finding]]
