"""The hostile-input catalogue of the offline tools (compare, report, diff): no GPU, no traceback, no hang.

Each case: (tool, files to create, arguments, exit code, fragments of the one error line). The line
must name the file or field and what is expected. Cases run in-process through ``main(argv)``, under
an alarm for those with a FIFO or a device (a FIFO blocks the reader that opens it, /dev/zero never
ends); the first of each tool runs in a real interpreter too, to prove "one line, no traceback" end to end.

Files: ``{name: content}``, content text, bytes, :data:`FIFO` or :data:`DIR`; ``{tmp}`` in an
argument is the test's directory.
"""

import copy
import json
import os
import pathlib
import re
import signal
import struct
import subprocess
import sys

import numpy as np
import pytest

from cublas_det import compare, diff
from cublas_det import report

from .conftest import unwrapped

REPO = pathlib.Path(__file__).parent.parent
FIFO, DIR = object(), object()
TOOLS = {"compare": compare.main, "report": report.main, "diff": diff.main}
MODULES = {"compare": "cublas_det.compare", "report": "cublas_det.report", "diff": "cublas_det.diff"}


def _small_run() -> dict:
    """A real stored run (H200, with identities), cut to its first two shapes: timed, checked, ratios."""
    data = json.loads((REPO / "tests" / "data" / "h200_run_identity.json").read_text())
    keep = list(dict.fromkeys(entry["group"] for entry in data["benchmarks"]))[:2]
    data["benchmarks"] = [entry for entry in data["benchmarks"] if entry["group"] in keep]
    data["cublas_det"]["ratios"] = {name: ratios for name, ratios in data["cublas_det"]["ratios"].items()
                                    if name in keep}
    return data


BASE = _small_run()
SHAPE = BASE["benchmarks"][0]["group"]  # trunk/W_in/forward
NAME = BASE["benchmarks"][0]["name"]
GOOD = json.dumps(BASE)


def run_with(path: str, value=..., text: str | None = None) -> str:
    """The small run with one field changed (``a.b.0.c``; ``value`` ... removes it), as JSON text."""
    data = copy.deepcopy(BASE)
    *parents, last = [int(part) if part.isdigit() else part for part in path.split("|")]
    node = data
    for part in parents:
        node = node[part]
    if value is ...:
        del node[last]
    else:
        node[last] = value
    return json.dumps(data)


def entry(field: str, value=...) -> str:
    return run_with(f"benchmarks|0|{field}", value)


def info(field: str, value=...) -> str:
    return entry(f"extra_info|{field}", value)


def _stored_cases():
    """compare GOOD BAD and report BAD, for a file whose one field is wrong."""
    where = "benchmarks[0]."
    files = [
        # -- the machine and the run's own section
        (run_with("machine_info|gpu", "H200"), ["bad.json: machine_info.gpu: expected an object, found 'H200'"]),
        (run_with("machine_info|gpu", None), ["machine_info.gpu: expected an object, found null"]),
        (run_with("machine_info|gpu|sm_count", "132"), ["machine_info.gpu.sm_count: expected a positive integer"]),
        (run_with("machine_info|gpu|name", 5), ["machine_info.gpu.name: expected a string, found 5"]),
        (run_with("machine_info|env", []), ["machine_info.env: expected an object, found a list"]),
        (run_with("machine_info", "x"), ["bad.json: machine_info: expected an object, found 'x'"]),
        (run_with("machine_info|devices", "x"), ["machine_info.devices: expected a list of objects"]),
        (run_with("machine_info|devices", [{"device_id": "0"}]), [("machine_info.devices[0].device_id: expected an integer "
                                                                  ">= 0, found '0'")]),
        (run_with("cublas_det", "x"), ["bad.json: cublas_det: expected an object, found 'x'"]),
        (run_with("cublas_det|ratios", []), ["cublas_det.ratios: expected an object of lists, found a list"]),
        (run_with(f"cublas_det|ratios|{SHAPE}", "x"), [f"cublas_det.ratios[{SHAPE!r}]: expected a list"]),
        (run_with(f"cublas_det|ratios|{SHAPE}|0|median", "fast"),
         [f"cublas_det.ratios[{SHAPE!r}][0].median: expected a positive number, found 'fast'"]),
        (run_with(f"cublas_det|ratios|{SHAPE}|0|numerator"),
         [f"cublas_det.ratios[{SHAPE!r}][0].numerator: missing; expected a string"]),
        (run_with(f"cublas_det|ratios|{SHAPE}|0|setup_dof", -1),
         [f"cublas_det.ratios[{SHAPE!r}][0].setup_dof: expected an integer >= 0, found -1"]),
        (run_with("cublas_det|timing", 5), ["cublas_det.timing: expected an object of objects, found 5"]),
        (run_with("cublas_det|wall_s", -1), ["cublas_det.wall_s: expected a finite number >= 0, found -1"]),
        (run_with("benchmarks", {}), ["bad.json: not a cublas_det --json file (no 'benchmarks' list)"]),
        (run_with("benchmarks|0", "x"), ["bad.json: benchmarks[0]: expected an object, found a str"]),
        (entry("name", 5), ["bad.json: benchmarks[0].name: expected a non-empty string, found 5"]),
        (entry("params", "x"), [where + "params: expected an object, found 'x'"]),
        # -- the shape and identity
        (info("shape|m", "8"), [where + "extra_info.shape.m: expected a positive integer, found '8'"]),
        (info("shape|m", 0), [where + "extra_info.shape.m: expected a positive integer, found 0"]),
        (info("shape|n", 1.5), [where + "extra_info.shape.n: expected a positive integer, found 1.5"]),
        (info("shape|k"), [where + "extra_info.shape.k: missing; expected a positive integer"]),
        (info("shape|cublas_op", 3), [where + "extra_info.shape.cublas_op: expected a string, found 3"]),
        (info("shape|tokens", -1), [where + "extra_info.shape.tokens: expected an integer >= 0, found -1"]),
        (info("identity", "seed 0"), [where + "extra_info.identity: expected an object, found 'seed 0'"]),
        (info("identity|seed", "0"), [where + "extra_info.identity.seed: expected an integer >= 0, found '0'"]),
        (info("identity|inputs", ["a"]), [where + "extra_info.identity.inputs: expected an object of strings"]),
        (info("identity|inputs|a", 5), [where + "extra_info.identity.inputs['a']: expected a string, found 5"]),
        # -- bits
        (info("digest", 5), [where + "extra_info.digest: expected a string, found 5"]),
        (info("device_digests", "aa"), [where + "extra_info.device_digests: expected an object of strings"]),
        (info("device_digests", {"0": 1}), [where + "extra_info.device_digests['0']: expected a string, found 1"]),
        (info("scenarios", {}), [where + "extra_info.scenarios: expected a list of objects, found an object"]),
        (info("scenarios|0", "repeat"), [where + "extra_info.scenarios[0]: expected an object, found 'repeat'"]),
        (info("scenarios|0|runs", -1), [where + "extra_info.scenarios[0].runs: expected an integer >= 0, found -1"]),
        (info("scenarios|0|index", "3,7"), [where + "extra_info.scenarios[0].index: expected a list of integers"]),
        (info("scenarios|0|reference_value", "0.5"), [where + "extra_info.scenarios[0].reference_value: expected a "
                                                               "number, found '0.5'"]),
        (info("scenarios|0|scenario"), [where + "extra_info.scenarios[0].scenario: missing; expected a string"]),
        # -- times: finite and positive
        (info("eager_stats", "x"), [where + "extra_info.eager_stats: expected an object, found 'x'"]),
        (info("eager_stats|data|0", -1e-6), [where + "extra_info.eager_stats.data[0]: expected a positive number "
                                                     "of seconds, found -1e-06"]),
        (info("sm_clock_mhz", "1980"), [where + "extra_info.sm_clock_mhz: expected a positive number, found '1980'"]),
        (info("sm_clock_mhz", float("nan")), [where + "extra_info.sm_clock_mhz: expected a positive number, found nan"]),
        (info("calls_per_batch", -3), [where + "extra_info.calls_per_batch: expected an integer >= 0, found -3"]),
        (info("timing_elapsed_s", "x"), [where + "extra_info.timing_elapsed_s: expected a finite number >= 0"]),
        (info("median_ci_s", [1e-5]), [where + "extra_info.median_ci_s: expected [low, high] seconds"]),
        (info("median_ci_s", [2e-5, 1e-5]), [where + "extra_info.median_ci_s: expected [low, high] seconds, low <= high"]),
        (info("median_ci_s", [0, 1e-5]), [where + "extra_info.median_ci_s[0]: expected a positive number of seconds"]),
        (info("noise_floor", -0.1), [where + "extra_info.noise_floor: expected a finite number >= 0, found -0.1"]),
        (info("noise_floor", float("inf")), [where + "extra_info.noise_floor: expected a finite number >= 0, found inf"]),
        (entry("stats|median", float("nan")), [where + "stats.median: expected a positive number of seconds, found nan"]),
        (entry("stats|data", "x"), [where + "stats.data: expected a list of positive numbers of seconds, found 'x'"]),
        (entry("stats|data|1", 0), [where + "stats.data[1]: expected a positive number of seconds, found 0"]),
        (entry("stats|rounds", "3"), [where + "stats.rounds: expected an integer >= 0, found '3'"]),
        (entry("stats|q1", -1), [where + "stats.q1: expected a positive number of seconds, found -1"]),
        (entry("params|mode", ...).replace('"name": "PEDANTIC", "math_mode"', '"math_mode"', 1),
         ["benchmarks[0]: no configuration (extra_info.config.name or params.mode)"]),
        (entry("name", NAME.replace("[PEDANTIC]", "[TF32]")),  # was shown as TF32, without a word
         ["benchmarks[0]: named TF32 but configured PEDANTIC; give a file that --json wrote"]),
        # -- numbers and nesting no writer makes, and one entry per GEMM
        (GOOD.replace('"sm_count": 132', '"sm_count": 1e400', 1), ["bad.json: the number 1e400 is beyond the range"]),
        (GOOD.replace('"seed": 0', '"seed": ' + "9" * 5000, 1), ["bad.json: an integer of 5000 digits (at most 40"]),
        ('{"benchmarks": ' + "[" * 200_000 + "]" * 200_000 + "}", ["bad.json: JSON nested deeper than can be read"]),
        (json.dumps({**BASE, "benchmarks": BASE["benchmarks"] + BASE["benchmarks"][:1]}),
         [f"benchmarks[0] {NAME!r} and benchmarks[8] {NAME!r} are both {SHAPE} in PEDANTIC: a run holds one entry"]),
    ]
    cases = [("compare", {"good.json": GOOD, "bad.json": text}, ["{tmp}/good.json", "{tmp}/bad.json"], 2, fragments)
             for text, fragments in files]
    cases += [("report", {"bad.json": text}, ["{tmp}/bad.json"], 2, fragments) for text, fragments in files[::3]]
    return cases


def _safetensors(header, data: bytes = b"", size=None) -> bytes:
    text = header if isinstance(header, bytes) else json.dumps(header).encode()
    return struct.pack("<Q", len(text) if size is None else size) + text + data


def _log(*entries, raw: bytes = b"") -> bytes:
    return b"".join(json.dumps(e).encode() + b"\n" for e in entries) + raw


def _leaf(**changes):
    return {"step": 0, "leaf": "x", "dtype": "float32", "shape": [2], "digest": "0" * 32, **changes}


def _npy(array, extra: bytes = b"", cut: int = 0) -> bytes:
    import io

    buffer = io.BytesIO()
    np.save(buffer, array)
    data = buffer.getvalue() + extra
    return data[:len(data) - cut]


F32 = np.ones(4, np.float32)
ST_GOOD = {"x": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}


def _diff_cases():
    """diff {tmp}/a {tmp}/a (or {tmp}/a {tmp}/b) for a run with one thing wrong."""
    run = ["{tmp}/a", "{tmp}/a"]
    st = "{tmp}/a/step_0.safetensors: "
    log = "{tmp}/a/trace.jsonl:1: "
    cases = [
        ({}, ["{tmp}/none", "{tmp}/none"], ["{tmp}/none: no such file or directory"]),
        ({"a": FIFO}, run, ["{tmp}/a: is a FIFO (named pipe), not a run: give a directory, a trace .jsonl"]),
        ({}, ["/dev/null", "/dev/null"], ["/dev/null: is a character device, not a run"]),
        ({"notes.txt": "x"}, ["{tmp}/notes.txt", "{tmp}/notes.txt"], ["notes.txt: not a run: give a directory"]),
        ({"a": DIR}, run, ["{tmp}/a: no steps found (it is empty); diff reads trace.jsonl; step_<N>/<leaf>.bin"]),
        ({"a/README.md": "x", "a/ckpt": DIR}, run, ["{tmp}/a: no steps found; found only README.md, ckpt/"]),
        ({"a/step_0": DIR}, run, ["nothing compared: no leaf is in both runs", "diff reads trace.jsonl"]),
        ({"a/step_0/notes.txt": "x"}, run, ["nothing compared", "skipped A: step_0/notes.txt, B: step_0/notes.txt"]),
        ({"a/step_0.safetensors": _safetensors({})}, run, ["nothing compared: no leaf is in both runs (0 leaves"]),
        ({"a/step_0/m.safetensors": _safetensors({"__metadata__": {}})}, run, ["nothing compared"]),
        # -- trace logs
        ({"a/trace.jsonl": DIR}, run, ["{tmp}/a/trace.jsonl: is a directory, not a file"]),
        ({"a/trace.jsonl": FIFO}, run, ["{tmp}/a/trace.jsonl: is a FIFO (named pipe), not a file"]),
        ({"a/trace.jsonl": b""}, run, ["{tmp}/a/trace.jsonl: empty trace log: no steps recorded"]),
        ({"a/trace.jsonl": b"{not json\n" + _log(_leaf())}, run, [log + "malformed JSON line"]),
        ({"a/trace.jsonl": b'{"step": "\xff"}\n'}, run, [log + "malformed JSON line (not UTF-8 text (invalid start"]),
        ({"a/trace.jsonl": b"[1, 2]\n"}, run, [log + "expected an object, found a list"]),
        ({"a/trace.jsonl": _log({"step": 0})}, run, [log + "leaf: missing; expected a non-empty string"]),
        ({"a/trace.jsonl": _log(_leaf(step=-1))}, run, [log + "step: expected an integer from 0 to 2**63 - 1, found -1"]),
        ({"a/trace.jsonl": _log(_leaf(step="1"))}, run, [log + "step: expected an integer from 0 to 2**63 - 1, found '1'"]),
        ({"a/trace.jsonl": _log(_leaf(step=10 ** 30))}, run, [log + "step: expected an integer from 0 to 2**63 - 1, found 10000"]),
        ({"a/trace.jsonl": b'{"step": 1e400}\n'}, run, [log + "the number 1e400 is beyond the range of a float"]),
        ({"a/trace.jsonl": b"[" * 100_000 + b"]" * 100_000 + b"\n"}, run, [log + "JSON nested deeper"]),
        ({"a/trace.jsonl": _log(_leaf(shape=[-1]))}, run, [log + "shape: expected a list of at most 64 integers from 0 to "
                                                          "2**63 - 1, found [-1]"]),
        ({"a/trace.jsonl": _log(_leaf(shape=[10 ** 30] * 2))}, run,  # was "found a list of 2": neither limit nor value
         [log + "shape: expected a list of at most 64 integers from 0 to 2**63 - 1, found a list of 2: [10000"]),
        ({"a/trace.jsonl": _log(_leaf(shape=[2 ** 70]))}, run, [log + "shape: expected a list", "1180591620717411303424"]),
        ({"a/trace.jsonl": _log(_leaf(shape="2"))}, run, [log + "shape: expected a list", "found '2'"]),
        ({"a/trace.jsonl": _log(_leaf(shape=[1] * 100))}, run, [log + "shape: expected a list of at most 64 integers", "found a list of 100: [1, 1"]),
        ({"a/trace.jsonl": _log(_leaf(dtype=5))}, run, [log + "dtype: expected a dtype name such as 'float32', found 5"]),
        ({"a/trace.jsonl": _log(_leaf(dtype="complex64"))}, run, [log + "dtype 'complex64' is not supported; choose float32"]),
        ({"a/trace.jsonl": _log(_leaf(digest="XYZ"))}, run, [log + "digest: expected 32 lowercase hex digits, found 'XYZ'"]),
        ({"a/trace.jsonl": _log(_leaf(algorithm="sha256"))}, run, [log + "algorithm: expected 'wsum128-v1', the digest this version reads, found 'sha256'"]),
        ({"a/trace.jsonl": _log(_leaf(file="../x.bin"))}, run, [log + "file: expected a path inside the run"]),
        ({"a/trace.jsonl": _log(_leaf(file="/etc/hostname"))}, run, [log + "file: expected a path inside the run",
                                                                     "found '/etc/hostname'"]),
        ({"a/trace.jsonl": _log(_leaf(file="step_0/x.bin"))}, run, ["{tmp}/a/step_0/x.bin: no such file"]),
        ({"a/trace.jsonl": _log(_leaf(file="step_0")), "a/step_0": DIR}, run,
         ["{tmp}/a/step_0: is a directory, not a file"]),
        ({"a/trace.jsonl": _log(_leaf(file="x.bin")), "a/x.bin": b"\0" * 4}, run,
         ["{tmp}/a/x.bin: 4 bytes, but its dtype and shape need 8"]),
        ({"a/trace.jsonl": _log(_leaf(), _leaf())}, run, ["trace.jsonl:2: leaf 'x' of step 0 was recorded twice"]),
        ({"a/trace.jsonl": b"{" + b" " * (2 << 20) + b"}\n"}, run, ["trace.jsonl: a line longer than 1048576 bytes"]),
        # -- safetensors
        ({"a/step_0.safetensors": b"\1\2"}, run, [st + "not a safetensors file (shorter than 8 bytes)"]),
        ({"a/step_0.safetensors": _safetensors({}, size=1 << 62)}, run, [st + "not a safetensors file (header of"]),
        ({"a/step_0.safetensors": _safetensors(b"{nope")}, run, [st + "not a safetensors file (bad JSON header"]),
        ({"a/step_0.safetensors": _safetensors(b"\xff\xfe")}, run, [st + "not a safetensors file (bad JSON header"]),
        ({"a/step_0.safetensors": _safetensors([1])}, run, [st + "not a safetensors file (the header is not a JSON"]),
        ({"a/step_0.safetensors": _safetensors({"x": 5})}, run, [st + "tensor 'x': expected an object with dtype"]),
        ({"a/step_0.safetensors": _safetensors({"x": {"dtype": "F32", "shape": [4]}})}, run,
         [st + "tensor 'x': header entry lacks data_offsets"]),
        ({"a/step_0.safetensors": _safetensors({"x": {**ST_GOOD["x"], "dtype": "F8_E4M3"}}, b"\0" * 16)}, run,
         [st + "tensor 'x' has dtype 'F8_E4M3', not supported; supported: F32, BF16, F16, F64"]),
        ({"a/step_0.safetensors": _safetensors({"x": {**ST_GOOD["x"], "shape": [-4]}}, b"\0" * 16)}, run,
         [st + "tensor 'x': shape must be a list of integers >= 0, not [-4]"]),
        ({"a/step_0.safetensors": _safetensors({"x": {**ST_GOOD["x"], "data_offsets": [16, 0]}}, b"\0" * 16)}, run,
         [st + "tensor 'x': data_offsets must be [begin, end], integers with 0 <= begin <= end, not [16, 0]"]),
        ({"a/step_0.safetensors": _safetensors({"x": {**ST_GOOD["x"], "data_offsets": [-4, 12]}}, b"\0" * 16)}, run,
         [st + "tensor 'x': data_offsets must be [begin, end]"]),
        ({"a/step_0.safetensors": _safetensors({"x": {**ST_GOOD["x"], "shape": [10 ** 15],
                                                       "data_offsets": [0, 4 * 10 ** 15]}}, b"\0" * 16)}, run,
         [st + "tensor 'x': data_offsets [0, 4000000000000000] do not hold float32[1000000000000000]"]),
        ({"a/step_0.safetensors": _safetensors(ST_GOOD, b"\0" * 24)}, run,
         [st + "8 bytes after the last tensor's data: longer than its header says"]),
        # -- numpy and raw binaries
        ({"a/step_0/x.npy": b"not an npy file at all"}, run, ["{tmp}/a/step_0/x.npy: not a readable .npy file"]),
        ({"a/step_0/x.npy": _npy(F32, cut=4)}, run, [("{tmp}/a/step_0/x.npy: 140 bytes, but its dtype and shape "
                                                      "need 144")]),
        ({"a/step_0/x.npy": _npy(F32, b"\0" * 4)}, run, ["x.npy: 148 bytes, but its dtype and shape need 144: longer"]),
        ({"a/step_0.npz": b"PK\3\4 broken"}, run, ["{tmp}/a/step_0.npz: not a readable .npz file"]),
        ({"a/step_0/opt.npz": b"not a zip"}, run, ["{tmp}/a/step_0/opt.npz: not a readable .npz file"]),
        ({"a/step_0/x.bin": b"\0" * 10}, run, ["x.bin: 10 bytes is not a whole number of float32 elements"]),
        ({"a/step_0/x.bin": FIFO}, run, ["{tmp}/a/step_0/x.bin: is a FIFO (named pipe), not a file"]),
        ({"a/step0_x.bin": FIFO}, run, ["{tmp}/a/step0_x.bin: is a FIFO (named pipe), not a file"]),
        ({"a/step_0/x.bin": b"\0" * 8, "a/step0_x.bin": b"\0" * 8}, run, ["leaf 'x' of step 0 is also in"]),
        # -- options
        ({"a/step_0/x.bin": b"\0" * 8}, [*run, "--order", "{tmp}/none.txt"], [("{tmp}/none.txt: no such file; give "
                                                                              "a text file of leaf names")]),
        ({"a/step_0/x.bin": b"\0" * 8}, [*run, "--order", "{tmp}/a"], ["{tmp}/a: is a directory, not a file"]),
        ({"a/step_0/x.bin": b"\0" * 8, "order.txt": FIFO}, [*run, "--order", "{tmp}/order.txt"],
         ["{tmp}/order.txt: is a FIFO (named pipe), not a file"]),
        ({"a/step_0/x.bin": b"\0" * 8, "order.txt": b"x\n\xff\xfe\n"}, [*run, "--order", "{tmp}/order.txt"],
         ["{tmp}/order.txt: not a text file; give a text file of leaf names, one per line"]),
        ({"a/step_0/x.bin": b"\0" * 8, "order.txt": "x\n".encode("utf-16")}, [*run, "--order", "{tmp}/order.txt"],
         ["{tmp}/order.txt: UTF-16 text; save it as UTF-8; give a text file of leaf names"]),
        ({"a/step_0/x.bin": b"\0" * 8}, [*run, "--dtype", "float8"], ["unknown dtype 'float8'"]),
        ({"a/step_0/x.bin": b"\0" * 8}, [*run, "--chunk-mib", "0"], ["--chunk-mib: must be more than 0, not 0"]),
        ({"a/step_0/x.bin": b"\0" * 8}, [*run, "--chunk-mib", "nan"], ["--chunk-mib: must be a finite number"]),
        ({"a/step_0/x.bin": b"\0" * 8}, [*run, "--json", "{tmp}/no/x.json"], ["--json {tmp}/no/x.json: directory"]),
    ]
    return [("diff", files, args, 2, fragments) for files, args, fragments in cases]


CASES = [
    *_stored_cases(),
    ("compare", {"good.json": GOOD, "fifo.json": FIFO}, ["{tmp}/good.json", "{tmp}/fifo.json"], 2,
     ["{tmp}/fifo.json: is a FIFO (named pipe), not a file; give a file that --json wrote"]),
    ("report", {"fifo.json": FIFO}, ["{tmp}/fifo.json"], 2, ["{tmp}/fifo.json: is a FIFO (named pipe), not a file"]),
    ("compare", {"good.json": GOOD}, ["{tmp}/good.json", "/dev/zero"], 2,
     ["/dev/zero: is a character device, not a file"]),
    ("report", {}, ["/dev/zero"], 2, ["/dev/zero: is a character device, not a file"]),
    ("compare", {"good.json": GOOD, "bad.json": b'{"a": "\xff"}'}, ["{tmp}/good.json", "{tmp}/bad.json"], 2,
     ["{tmp}/bad.json: not a text file; give a file that --json wrote"]),
    ("compare", {"good.json": GOOD, "empty.json": ""}, ["{tmp}/good.json", "{tmp}/empty.json"], 2,
     ["{tmp}/empty.json: not JSON: it may be truncated; give a file that --json wrote"]),
    ("report", {"bad.json": info("scenarios|0|scenario", "again")}, ["{tmp}/bad.json"], 2,
     ["benchmarks[0].extra_info.scenarios[0]: cannot be read back (scenario 'again' is not one this version"]),
    ("report", {"bad.json": info("scenarios|0|kind", "maybe")}, ["{tmp}/bad.json"], 2,
     ["benchmarks[0].extra_info.scenarios[0]: cannot be read back ('maybe' is not a valid Kind)"]),
    ("report", {"bad.json": info("config|math_mode", "FAST")}, ["{tmp}/bad.json"], 2,
     ["benchmarks[0].extra_info.config: cannot be read back (missing or unknown 'FAST')"]),
    ("report", {"bad.json": info("config", {"name": "PEDANTIC"})}, ["{tmp}/bad.json"], 2,
     ["extra_info.config: cannot be read back (missing or unknown 'math_mode')"]),
    ("report", {"bad.json": info("kernels", {"calls": 1})}, ["{tmp}/bad.json"], 2,
     ["extra_info.kernels: cannot be read back (missing or unknown 'launches')"]),
    ("report", {"bad.json": info("eager_stats")}, ["{tmp}/bad.json"], 2,
     ["benchmarks[0].extra_info.eager_stats.data: missing; a timed entry has its eager times too"]),
    ("report", {"run.json": GOOD}, ["{tmp}/run.json", "--markdown", "/dev/full"], 2,
     ["could not write /dev/full: No space left on device"]),
    *_diff_cases(),
]
SUBPROCESS = {"compare": 1, "report": 1, "diff": 1}  # cases run in a real interpreter, per tool


def _create(tmp_path, files):
    for name, content in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if content is FIFO:
            os.mkfifo(path)
        elif content is DIR:
            path.mkdir(exist_ok=True)
        else:
            path.write_bytes(content if isinstance(content, bytes) else content.encode())


def _in_subprocess(index: int) -> bool:
    tool = CASES[index][0]
    return index in [i for i, case in enumerate(CASES) if case[0] == tool][:SUBPROCESS[tool]]


def _on_alarm(signum, frame):
    raise TimeoutError("hung: a FIFO or a device was opened or read to its end")


@pytest.mark.parametrize("index", range(len(CASES)),
                         ids=[f"{case[0]}:{'/'.join(case[1]) or ' '.join(case[2])}"[:70] for case in CASES])
def test_hostile_input_is_one_line_naming_the_file_and_what_is_expected(tmp_path, capsys, monkeypatch, index):
    tool, files, args, code, fragments = CASES[index]
    monkeypatch.setitem(sys.modules, "torch", None)  # the same line whether PyTorch is installed or not
    _create(tmp_path, files)
    argv = [arg.replace("{tmp}", str(tmp_path)) for arg in args]
    if _in_subprocess(index):
        result = subprocess.run([sys.executable, "-m", MODULES[tool], *argv], capture_output=True, text=True,
                                timeout=60, cwd=REPO, check=False)
        returned, err = result.returncode, unwrapped(result.stderr)
    else:
        previous = signal.signal(signal.SIGALRM, _on_alarm)
        signal.alarm(20)
        try:
            returned = TOOLS[tool](argv)
        except SystemExit as stop:  # argparse's own errors
            returned = stop.code
        finally:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, previous)
        err = unwrapped(capsys.readouterr().err)
    lines = err.strip().splitlines()
    assert returned == code, err
    assert "Traceback" not in err and len(lines) == 1, err
    assert re.match(r"^\S[^:]*: error: ", lines[0]), lines[0]  # PROG: error: message
    for fragment in fragments:
        assert fragment.replace("{tmp}", str(tmp_path)) in lines[0], lines[0]


def test_the_catalogue_holds_at_least_80_cases_across_the_three_commands():
    tools = [case[0] for case in CASES]
    assert len(CASES) >= 80 and all(tools.count(tool) >= 10 for tool in TOOLS), (len(CASES), set(tools))
    assert sum(_in_subprocess(i) for i in range(len(CASES))) == len(TOOLS)
