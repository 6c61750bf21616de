"""The capture report: what was captured, the findings, the distinct GEMMs, and the command that replays them."""

from __future__ import annotations

import shlex
import textwrap

from ..capture.findings import mode_name

WIDTH = 100
_DTYPE = {"R_32F": "fp32", "R_16BF": "bf16", "R_16F": "fp16", "R_64F": "fp64", "C_32F": "c64", "C_64F": "c128"}


def _size(n) -> str:
    if n is None:
        return "cuBLAS"
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.3g}{unit}"
    return str(n)


def _wrap(text: str, indent: str) -> list[str]:
    return textwrap.wrap(text, WIDTH, initial_indent=indent, subsequent_indent=indent + "  ", break_on_hyphens=False,
                         break_long_words=False)


def render_capture(capture, path: str) -> str:
    """``capture``: a :class:`~cublas_det.capture.file.CaptureFile`; ``path``: where it was written."""
    data = capture.data
    command = shlex.join(data.get("command") or []) or "(logs read with --from)"
    status = data.get("exit_status")
    lines = _wrap(f"Captured: {command}" + ("" if status is None else f" (exit {status})"), "")
    logs = data.get("logs", {})
    unread = sum(log.get("malformed", 0) + log.get("unknown_lines", 0) for log in logs.values())
    sizes = ", ".join(f"{kind} log {_size(log.get('bytes', 0))}B" for kind, log in logs.items())
    lines += _wrap(f"{data.get('calls', 0):,} GEMM calls, {len(capture.gemms)} distinct; {sizes}; "
                   + (f"{unread:,} lines unread (--json lists them)" if unread else "every line read"), "  ")
    mixed = logs.get("cublas", {}).get("interleaved_gemms", 0)
    if mixed:
        lines += _wrap(f"unread: {mixed:,} GEMM calls whose log lines interleave with another thread's (cuBLAS "
                       "writes a call line by line, and threads calling at once mix them); not in the table", "  ")
    for note in data.get("notes", []):
        lines += _wrap(f"note: {note}", "  ")
    if not data.get("complete"):
        lines += _wrap("incomplete: the program did not end normally; what it ran up to then is below", "  ")
    lines.append("")
    if capture.findings:
        lines.append("Findings")
    elif capture.gemms:
        lines.append("Findings: none of those looked for (docs/capture.md lists them)")
    for finding in capture.findings:
        lines += _wrap(f"{finding.kind:<9}  {finding.text}", "  ")
    lines.append("")
    plans = capture.plans
    if not plans:
        lines += _wrap("GEMMs: none in the logs (did the program call cuBLAS? were the logs written with "
                       "CUBLAS_LOGINFO_DBG=1 and CUBLASLT_LOG_LEVEL=5?)", "")
        return "\n".join(lines)
    lines.append("GEMMs, row-major as the shim runs them (cuBLAS's own arguments are in the file)")
    lines.append(f"  {'id':<3} {'calls':>6}  {'M x N x K:op':<19} {'types':<10} {'compute':<8} {'math':<8} "
                 f"{'wkspace':<7} like / replay")
    for plan in plans:
        d = plan.definition
        m, n, k = d.n, d.m, d.k
        op = (d.transa + d.transb).lower()
        batch = f" x{d.batch_count}" if d.batch_count > 1 else ""
        types = f"{_DTYPE.get(d.a_type, d.a_type)}->{_DTYPE.get(d.c_type, d.c_type)}"
        compute = d.compute_type.removeprefix("COMPUTE_")
        math = "(Lt)" if d.is_lt else data_mode(d.math_mode)
        status_text = plan.like or ("replayed" if plan.replayed else "")
        if not plan.replayed:
            status_text = (f"{plan.like}; " if plan.like else "") + f"not replayed: {plan.reason}"
        row = (f"  {plan.gemm_id:<3} {plan.calls:>6,}  {f'{m}x{n}x{k}:{op}{batch}':<19} {types:<10} {compute:<8} "
               f"{math:<8} {_size(d.workspace_bytes):<7} ")
        lines += textwrap.wrap(status_text, WIDTH, initial_indent=row, subsequent_indent=" " * len(row),
                               break_on_hyphens=False) or [row]
        if plan.note:
            lines += _wrap(plan.note, " " * 8)
    lines += _handle_lines(data, plans)
    replayable = sum(plan.replayed for plan in plans)
    lines.append("")
    if replayable and path:
        lines.append(f"Replay the {replayable} replayable GEMM(s), checked and timed:")
        lines.append(f"  cublas-det bench --capture {shlex.quote(path)}")
    elif replayable:
        lines.append("The capture file could not be written: nothing to replay from.")
    else:
        lines.append("Nothing here can be replayed by this version (see 'not replayed' above).")
    return "\n".join(lines)


def _handle_lines(data: dict, plans) -> list[str]:
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
            lines += _wrap(f"{key[1]}: {', '.join(ids)}", "  ")
            continue
        streams = ", ".join(f"{stream} ({calls})" for stream, calls in handle["streams"].items())
        threads = len(handle["threads"])
        lines += _wrap(f"handle {key[1]} (process {handle['process']}, {threads} thread{'s' * (threads != 1)}, "
                       f"{handle['calls']:,} calls on stream{'s' * (len(handle['streams']) != 1)} {streams}): "
                       f"{', '.join(ids)}", "  ")
    return lines


def data_mode(value) -> str:
    return mode_name(value).replace("+DISALLOW_RPR", "+DRPR")
