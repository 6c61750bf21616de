"""The capture file (``"format": "cublas_det.capture"``): its document (command and exit status, what each log
gave, the distinct GEMMs with their sites and kernels, the handles, and the findings), written from a capture and
read back as its GEMMs, findings and plans."""

from __future__ import annotations

import dataclasses

from ..base import schema
from ..base.errors import InputFileError
from ..base.schema import Each, Record
from ..core.config import math_mode_name
from ..core.definition import GemmDefinition
from ..core.key import ReplayPlan, plans
from ..base.files import check_format, read_json
from . import model
from .findings import Finding, findings
from .model import Capture

FORMAT, VERSION = "cublas_det.capture", 1
MAX_FILE_BYTES = 256 << 20
HINT = "give a file that `cublas-det capture` wrote"

# A GEMM's arguments as the log gave them; their bounds are the definition's own (apilog.model).
_REQUIRED = {"id": "a non-empty string", "calls": "a positive integer", "api": "a string", "transa": "a string",
             "transb": "a string", **dict.fromkeys(("m", "n", "k", "lda", "ldb", "ldc"), "an integer"),
             **dict.fromkeys(("a_type", "b_type", "c_type", "compute_type"), "a string")}
_GEMM = Record({
    **_REQUIRED, "algo": "an integer", "batch_count": "an integer", "strides": "a list of integers",
    "math_mode": "an integer", "workspace_bytes": "an integer", "scale_type": "a string", "epilogue": "a string",
    "bias": "true or false", "sm_count_target": "an integer", "preference": "an object", "lt_algo": "an object",
    "workspace_unknown": "true or false"},
    required=tuple(_REQUIRED))
_FINDING = Record({"id": "a string", "kind": "a string", "text": "a string", "handles": "a list",
                   "streams": "a list", "gemms": "a list"}, required=("id", "kind", "text"))
_COUNT = "an integer >= 0"
# What the capture's report reads of each log, of the handles and of the limits it ran under.
_LOG = Record({**dict.fromkeys(("bytes", "calls", "gemm_calls", "malformed", "malformed_gemms", "unknown_lines",
                                "interleaved", "interleaved_gemms", "invalid_gemms", "cut"), _COUNT),
               "stopped_after_exit_s": "a finite number >= 0", "samples": "a list"})
_HANDLE = Record({"process": "an integer", "handle": "a string", "calls": _COUNT,
                  "streams": "an object of integers >= 0", "threads": "a list"},
                 required=("handle", "calls", "streams", "threads"))
_SITE = Record({"process": "an integer", "handle": "a string", "stream": "a string", "thread": "an integer",
                "calls": _COUNT})
_CAPTURE = Record({
    "complete": "true or false", "command": "a list of strings", "exit_status": "an integer",
    "notes": "a list of strings", "logs": Each(_LOG, dict), "unreplayed": "an object of integers >= 0",
    "kept": Record({"gemms": _COUNT, "sites_per_gemm": _COUNT}), "calls": _COUNT, "dropped_calls": _COUNT,
    "unattributed_calls": _COUNT, "lt_kernels_unmatched": _COUNT, "handles": Each(_HANDLE),
    "gemms": Each(Record({**_GEMM.fields, "sites": Each(_SITE)}, required=_GEMM.required)),
    "findings": Each(_FINDING)}, required=("gemms",))



@dataclasses.dataclass(frozen=True)
class CaptureFile:
    """A capture as stored: what the report and the replay read."""

    data: dict
    gemms: tuple  # (id, GemmDefinition, calls)
    findings: tuple  # Finding
    path: str = ""

    @property
    def plans(self) -> list[ReplayPlan]:
        return plans(self.gemms)


def to_dict(capture: Capture, *, complete: bool, compute_capability: str | None = None) -> dict:
    """The capture's document; ``compute_capability``: the local GPU's (``"9.0"``), for the findings. No GPU is
    written: the logs do not say which ran them (files that hold an empty ``gpu`` still read)."""
    unmatched = capture.joined()
    if unmatched and "cublas" in capture.logs:
        capture.notes.append(f"{unmatched:,} cuBLASLt kernel launches had no cuBLAS call of their shape in the "
                             "cuBLAS log (the log cut?)")
    elif unmatched:
        capture.notes.append(f"{unmatched:,} cuBLASLt kernel launches (cublasLt...Matmul) were made inside cuBLAS "
                             "calls, which are in the cuBLAS log, not read: give it too "
                             "(--from CUBLAS_LOG CUBLASLT_LOG)")
    ordered = sorted(capture.gemms.items(), key=lambda item: -item[1].calls)  # then in the order first seen
    ids = {definition: f"g{i}" for i, (definition, _) in enumerate(ordered, 1)}
    gemms = [{"id": ids[definition], "calls": stats.calls, **definition.to_dict(),
              "math_mode_name": math_mode_name(definition.math_mode) if not definition.is_lt else None,
              "sites": [{**dataclasses.asdict(site), "calls": n} for site, n in stats.sites.most_common()],
              "lt_kernels": [{"algo": dict(algo), "calls": n} for algo, n in stats.internal.most_common()]}
             for definition, stats in ordered]
    handles = [{"process": h.process, "handle": h.handle, "calls": h.calls, "streams": dict(h.streams),
                "threads": sorted(t for t in h.threads if t is not None),
                "math_modes": sorted(math_mode_name(m) for m in h.math_modes),
                "workspaces": sorted(h.workspaces, key=lambda w: -1 if w is None else w)}
               for h in capture.handles().values()]
    return {
        "format": FORMAT, "version": VERSION, "command": capture.command, "exit_status": capture.exit_status,
        "complete": complete, "notes": capture.notes, "cublas_versions": sorted(capture.versions),
        "environment": capture.environment,
        "logs": {kind: dataclasses.asdict(stats) for kind, stats in capture.logs.items()},
        "calls": sum(s.calls for s in capture.gemms.values()), "dropped_calls": capture.dropped_calls,
        "kept": {"gemms": model.MAX_GEMMS, "sites_per_gemm": model.MAX_SITES},
        "unattributed_calls": capture.unattributed_calls, "lt_kernels_unmatched": unmatched,
        "unreplayed": dict(capture.unreplayed.most_common()),
        "gemms": gemms, "handles": handles,
        "lt_threads": {str(t): dict(streams) for t, streams in capture.lt_threads().items()},
        "findings": [f.to_dict() for f in findings(capture, ids, compute_capability)],
    }


def load(path: str) -> CaptureFile:
    """Read a capture file, refusing (one line, :class:`InputFileError`) what no capture is."""
    return from_data(read_json(path, HINT, max_bytes=MAX_FILE_BYTES, what="capture file"), path)


def from_data(data, path: str) -> CaptureFile:
    """The :class:`CaptureFile` of a document, checked: each GEMM's definition within bounds, each once."""
    data = check(data, path)
    gemms = []
    for gemm in data["gemms"]:
        try:
            gemms.append((gemm["id"], GemmDefinition.from_dict(gemm), gemm["calls"]))
        except (TypeError, ValueError) as err:
            raise InputFileError(f"{path}: GEMM {gemm['id']} is malformed ({err}); {HINT}") from None
    found = tuple(Finding(f["id"], f["kind"], f["text"], tuple(f.get("handles") or ()), tuple(f.get("streams") or ()),
                          tuple(f.get("gemms") or ())) for f in data.get("findings") or ())
    ids, definitions = {}, {}
    for gemm_id, definition, _ in gemms:
        if gemm_id in ids:
            raise InputFileError(f"{path}: two GEMMs with the id {gemm_id}; {HINT}")
        if definition in definitions:
            raise InputFileError(f"{path}: GEMMs {definitions[definition]} and {gemm_id} are the same GEMM "
                                 f"(a capture lists each once); {HINT}")
        ids[gemm_id] = definitions[definition] = gemm_id
    return CaptureFile(data, tuple(gemms), found, path)


def check(data, path: str) -> dict:
    """``data`` if it is a capture file's document as described; else one line (:class:`InputFileError`)."""
    check_format(data, path, FORMAT, VERSION, "capture file", HINT, "capture again")
    return schema.check(data, f"{path}:", _CAPTURE, hint=HINT)
