"""The capture file's document (``"format": "cublas_det.capture"``): command and exit status, what each log gave,
the distinct GEMMs with their sites and kernels, the handles, and the findings."""

from __future__ import annotations

from ..base import schema
from .files import check_format
from ..base.schema import Each, Record

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


def check(data, path: str) -> dict:
    """``data`` if it is a capture file's document as described; else one line (:class:`InputFileError`)."""
    check_format(data, path, FORMAT, VERSION, "capture file", HINT, "capture again")
    return schema.check(data, f"{path}:", _CAPTURE, hint=HINT)
