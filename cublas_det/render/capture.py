"""The capture report: what was captured, the findings, the distinct GEMMs, and the command that replays them."""

from __future__ import annotations

import shlex

from ..core.key import shape_of
from ..core.config import math_mode_name
from ..base.dtypes import BY_CUDA_NAME
from ..core.shapes import shape_spec
from ..base.words import noun_for, plural, report_width, size, table, wrapped

_HEADER = ("id", "calls", "M x N x K:op", "types", "compute", "math", "wkspace")
_KIND_WIDTH = len("precision")  # the longest finding kind: the findings of every report align alike
_LAST_COLUMN = 30  # the least room for "like / replay"; less, and it goes on a line of its own


def _item(text, width: int) -> list[str]:
    """A line (or several) under a heading, its rest indented under its first words."""
    return wrapped(text, width, indent="    ", first="  ")


def render_capture(capture, path: str, width: int | None = None) -> str:
    """``capture``: a :class:`~cublas_det.apilog.file.CaptureFile`; ``path``: where it was written."""
    width = width or report_width()
    data = capture.data
    command = shlex.join(data.get("command") or []) or "(logs read with --from)"
    status = data.get("exit_status")
    lines = wrapped(f"Captured: {command}" + ("" if status is None else f" (exit {status})"), width)
    logs = data.get("logs", {})
    sizes = ", ".join(f"{kind} log {size(log.get('bytes', 0))}B" for kind, log in logs.items()) or "no log"
    unread = _unread(logs, path)
    ran, complete = bool(data.get("command")), data.get("complete")  # a log read with --from is complete if whole
    lines += _item(f"{plural(data.get('calls', 0), 'GEMM call')}, {len(capture.gemms)} distinct; {sizes}; "
                   + ("every line read" if not unread and (ran or complete) else "some unread (below)"), width)
    lines += _item(unread + _not_listed(data) + [f"note: {note}" for note in data.get("notes", [])], width)
    if not complete:
        why, some, none = (("the program did not end normally", "the GEMMs it ran up to then are below",
                            "it logged no GEMM before it ended") if ran else
                           ("a log is not whole (see the note)", "the GEMMs read up to where it stops are below",
                            "no GEMM was read before it stops"))
        lines += _item(f"incomplete: {why}; {some if capture.gemms else none}", width)
    lines.append("")
    if capture.findings or capture.gemms:
        lines.append("Findings" if capture.findings else
                     "Findings: none of those looked for (docs/capture.md lists them)")
        lines += _item(table([(finding.kind, finding.text) for finding in capture.findings], widths=(_KIND_WIDTH, 0)),
                       width)
        lines.append("")
    plans = capture.plans
    if not plans:
        lines += wrapped(_no_gemms(data), width)
        return "\n".join(lines)
    lines.append("GEMMs, row-major as the shim runs them (cuBLAS's own arguments are in the file)")
    lines += _table(plans, width) + _handle_lines(data, width)
    replayable = sum(plan.replayed for plan in plans)
    if replayable and path:
        lines += ["", f"Replay the {plural(replayable, 'replayable GEMM')}, checked and timed:",
                  f"  cublas-det bench --capture {shlex.quote(path)}"]
    else:
        lines += ["", "The capture file could not be written: nothing to replay from." if replayable else
                  "Nothing here can be replayed by this version (see 'not replayable' above)."]
    return "\n".join(lines)


def _unread(logs: dict, path: str) -> list[str]:
    """What the logs held that was not read, by kind, each with where it is quoted."""
    lines, parts = [], []
    for kind, log in logs.items():
        for field, noun, what in (("malformed", "call", "malformed"), ("unknown_lines", "line", f"not {kind}'s"),
                                  ("cut", "call", "cut at the log's end")):
            if log.get(field):
                gemms = f", {log['malformed_gemms']:,} of them GEMMs" if field == "malformed" and log.get(
                    "malformed_gemms") else ""
                parts.append(f"{plural(log[field], noun)} {what} ({kind} log{gemms})")
    if parts:
        lines.append(f"unread: {', '.join(parts)}; quoted in {path or 'the capture file'}: logs.*.samples")
    mixed, gemms = (logs.get("cublas", {}).get(field, 0) for field in ("interleaved", "interleaved_gemms"))
    if mixed:
        lines.append(f"unread: {plural(mixed, 'call')} ({gemms:,} of them GEMMs) whose log lines interleave with "
                     "another thread's (cuBLAS writes a call line by line, and threads calling at once mix them); "
                     "not in the table")
    stopped = {kind: log["stopped_after_exit_s"] for kind, log in logs.items() if log.get("stopped_after_exit_s")}
    if stopped:
        noun = noun_for(len(stopped), "log")
        lines.append(f"unread: capture stopped reading the {' and '.join(stopped)} {noun} "
                     f"{max(stopped.values()):g} s after the program ended, a process it left still running or "
                     "holding the log open: what that process wrote later is not here. To capture a job whose "
                     "processes outlive it, let the job write the logs itself (CUBLAS_LOGINFO_DBG=1 "
                     "CUBLAS_LOGDEST_DBG=FILE, CUBLASLT_LOG_LEVEL=5 CUBLASLT_LOG_FILE=FILE) and read them with --from")
    return lines


def _not_listed(data: dict) -> list[str]:
    """GEMM calls read and not in the table, or not attributed to a handle."""
    lines = []
    invalid = sum(log.get("invalid_gemms", 0) for log in data.get("logs", {}).values())
    if invalid:
        lines.append(f"not replayable: {plural(invalid, 'GEMM call')} of an empty or impossible shape (m = 0, a "
                     "leading dimension below its matrix's rows ...), quoted in logs.*.samples; not in the table")
    for function, calls in (data.get("unreplayed") or {}).items():
        lines.append(f"not replayable: {plural(calls, 'call')} of {function}, which this version does not read; "
                     "not in the table")
    kept = data.get("kept", {})  # the limits the capture ran under (this version's writes them)
    if data.get("dropped_calls"):
        lines.append(f"not in the table: {plural(data['dropped_calls'], 'call')} of GEMMs past the first "
                     f"{kept.get('gemms', 0):,} distinct ones (only those are kept)")
    if data.get("unattributed_calls"):
        lines.append(f"not attributed: {plural(data['unattributed_calls'], 'call')} from sites (process, handle, "
                     f"stream, thread) past the {kept.get('sites_per_gemm', 0)} kept per GEMM: the handles and "
                     "findings below miss them")
    return lines


def _no_gemms(data: dict) -> str:
    """Why the table is empty: what the logs did show, and what to look at."""
    logs = data.get("logs", {})
    unmatched = data.get("lt_kernels_unmatched", 0)
    if unmatched:
        return (f"GEMMs: none listed: the cuBLASLt log shows {plural(unmatched, 'kernel launch')} "
                "made inside cuBLAS calls and no cublasLtMatmul of the program's own (see the note above)")
    if any(log.get(field) for log in logs.values() for field in ("malformed", "interleaved", "cut", "invalid_gemms")) \
            or data.get("unreplayed"):
        return "GEMMs: none read (see what was not, above)"
    calls = logs.get("cublas", {}).get("calls", 0)
    if calls:
        return f"GEMMs: none among the {plural(calls, 'cuBLAS call')} in the log"
    if any(log.get("stopped_after_exit_s") for log in logs.values()):
        return "GEMMs: none read before capture stopped reading (see above)"
    if data.get("command"):
        return ("GEMMs: none: the program wrote no cuBLAS API log line (it called no cuBLAS, or set "
                "CUBLAS_LOGDEST_DBG or CUBLAS_LOGINFO_DBG itself)")
    return ("GEMMs: none in the logs (did the program call cuBLAS? were the logs written with "
            "CUBLAS_LOGINFO_DBG=1 and CUBLASLT_LOG_LEVEL=5?)")


def _table(plans, width: int) -> list[str]:
    """The GEMMs, a row each: the columns as wide as their cells, the last wrapped in what room is left."""
    rows = []
    for plan in plans:
        d = plan.definition
        shape = shape_of(d)
        batch = f" x{d.batch_count}" if d.batch_count > 1 else ""
        status = (plan.like or "replayable") if plan.replayed else \
            (f"{plan.like}; " if plan.like else "") + f"not replayable: {plan.reason}"
        rows.append(((plan.gemm_id, f"{plan.calls:,}", shape_spec(shape.m, shape.n, shape.k, d.transa + d.transb) + batch,
                      f"{_label(d.a_type)}->{_label(d.c_type)}",
                      d.compute_type.removeprefix("COMPUTE_"),
                      "(Lt)" if d.is_lt else math_mode_name(d.math_mode, narrow=True),
                      "unknown" if d.workspace_unknown else "cuBLAS" if d.workspace_bytes is None else
                      size(d.workspace_bytes)), status, plan.note))
    heads = table([_HEADER, *(row[0] for row in rows)], indent="  ", gap=" ", right=(1,))
    lead = max(map(len, heads)) + 1  # the widest line has every column at its full width
    heads = [line.ljust(lead) for line in heads]
    own_line = width - lead < _LAST_COLUMN
    lines = [heads[0].rstrip(), "      like / replay"] if own_line else wrapped("like / replay", width, first=heads[0])
    for (_, status, note), row in zip(rows, heads[1:]):
        lines += ([row.rstrip()] + wrapped(status, width, indent=" " * 8, first=" " * 6) if own_line
                  else wrapped(status, width, indent=" " * lead, first=row))
        if note:
            lines += wrapped(note, width, indent=" " * 10, first=" " * 8)
    return lines


def _handle_lines(data: dict, width: int) -> list[str]:
    """Where the GEMMs came from: each handle's process, threads, streams and GEMMs."""
    by_handle: dict = {}
    for gemm in data.get("gemms", []):
        for site in gemm.get("sites", []):
            key = (site.get("process"), site.get("handle")) if site.get("handle") else (
                None, f"cuBLASLt, thread {site.get('thread')}")
            by_handle.setdefault(key, {})[gemm["id"]] = None
    if not by_handle:
        return []
    lines = ["", "Where they came from"]
    handles = {(h["process"], h["handle"]): h for h in data.get("handles", [])}
    for key, ids in by_handle.items():
        handle = handles.get(key)
        if handle is None:
            lines += _item(f"{key[1]}: {', '.join(ids)}", width)
            continue
        streams = ", ".join(f"{stream} ({calls})" for stream, calls in handle["streams"].items())
        noun = noun_for(len(handle["streams"]), "stream")
        lines += _item(f"handle {key[1]} (process {handle['process']}, {plural(len(handle['threads']), 'thread')}, "
                       f"{plural(handle['calls'], 'call')} on {noun} {streams}): {', '.join(ids)}", width)
    return lines


def _label(cuda_name: str) -> str:
    """``fp32`` for ``R_32F``: an element type as the table names it."""
    return getattr(BY_CUDA_NAME.get(cuda_name), "label", cuda_name)
