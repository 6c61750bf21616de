"""Reading a stored run (a ``--json`` file) for comparison and re-rendering, checked entry by entry.

A malformed file is one :class:`~cublas_det.errors.InputFileError` naming the file, the entry and
the field, before any GPU work. Files of cublas_det 0.1 carry no identity (seed, T, input digests):
they are read, and :attr:`Run.legacy` says so, so that comparisons can say what they could not check.
"""

from __future__ import annotations

import dataclasses
import json
import math

from ._validate import open_regular, parse_json
from .errors import InputFileError

MAX_RUN_FILE_BYTES = 256 << 20  # a default run is 0.5 MB; the largest preset with timing a few MB


@dataclasses.dataclass(frozen=True)
class Entry:
    """One shape in one configuration of a stored run: what identifies it, its bits and its time."""

    name: str  # "trunk/W_in/dW[PEDANTIC]"
    shape_name: str
    spec: str  # "128x56x4096:nt": M, N, K and the cuBLAS op
    config: str  # "PEDANTIC"
    digests: frozenset  # one digest, or one per device for a sweep; empty when none was computed
    identity: dict | None  # seed, preset, tokens, input digests; None in files of cublas_det 0.1
    stats: dict | None
    extra_info: dict

    @property
    def key(self) -> tuple[str, str]:
        """How results are paired: the shape's role (``mamba2-130m/in_proj/dW``, or the spec of a custom
        shape) and the configuration. A pair is compared only once its identity agrees too."""
        return self.shape_name, self.config

    @property
    def gemm_key(self) -> tuple[str, str]:
        """The GEMM itself (M, N, K, op) and the configuration: pairs a custom shape with a preset's."""
        return self.spec, self.config

    @property
    def tokens(self) -> int | None:
        return (self.identity or {}).get("tokens") or self.extra_info.get("shape", {}).get("tokens") or None


@dataclasses.dataclass(frozen=True)
class Run:
    """A stored run: where it came from and its entries in file order."""

    source: str
    machine_info: dict
    version: str
    datetime: str
    entries: tuple[Entry, ...]
    data: dict  # the whole file, for re-rendering

    @property
    def legacy(self) -> bool:
        """Written by a version that recorded no identity (seed, T, input digests)."""
        return any(entry.identity is None for entry in self.entries)

    @property
    def sweep(self) -> bool:
        return bool((self.data.get("cublas_det") or {}).get("sweep"))

    def describe(self) -> str:
        """``NVIDIA H200, 132 SMs, driver 13.0, cuBLAS 13.1.0``: what the bits depend on."""
        return describe_machine(self.machine_info)


def describe_machine(info: dict) -> str:
    gpu = info.get("gpu") or {}
    return (f"{gpu.get('name', '?')}, {gpu.get('sm_count', '?')} SMs, driver {info.get('driver_version', '?')}, "
            f"cuBLAS {info.get('cublas_version', '?')}")


def load_run(path: str, suite_advice: str | None = None) -> Run:
    """Read and check a ``--json`` file; :class:`InputFileError` (one line) on any trouble. ``suite_advice``:
    what to tell a user who gave the pytest-benchmark suite's file instead (the line names that file)."""
    try:
        return _load_run(path)
    except InputFileError:
        if suite_advice and is_suite_file(path):
            raise InputFileError(f"{path}: a file of python -m pytest bench/, not a --json run of python -m "
                                 f"cublas_det.bench; {suite_advice}") from None
        raise


def _load_run(path: str) -> Run:
    return run_from_dict(_read_json(path), path)


def _read_json(path: str):
    hint = "give the path of a file written by --json"
    with open_regular(path, hint, max_bytes=MAX_RUN_FILE_BYTES, what="--json file") as file:
        try:
            text = file.read()
        except OSError as err:
            raise InputFileError(f"{path}: cannot be read ({err.strerror or err}); {hint}") from None
    try:
        return parse_json(text, path)
    except UnicodeDecodeError:
        raise InputFileError(f"{path}: not a text file; {hint}") from None
    except json.JSONDecodeError as err:
        raise InputFileError(f"{path}: not JSON ({err.msg} at line {err.lineno}, column {err.colno}); "
                             "the file may be truncated") from None


def is_suite_file(path: str) -> bool:
    """Whether ``path`` is a file of the pytest-benchmark suite (``pytest bench/ --benchmark-json``), which
    :func:`load_run` refuses: what to tell a user who gave it where a ``--json`` run was wanted."""
    try:
        return is_suite_data(_read_json(path))
    except InputFileError:
        return False


def is_suite_data(data) -> bool:
    """Whether parsed JSON is the pytest-benchmark suite's: its entries carry ``gemms_per_sample``."""
    benchmarks = data.get("benchmarks") if isinstance(data, dict) else None
    return isinstance(benchmarks, list) and any(
        isinstance(b, dict) and isinstance(b.get("extra_info"), dict) and "gemms_per_sample" in b["extra_info"]
        for b in benchmarks)


def run_from_dict(data, source: str) -> Run:
    """Check a run's layout and read its entries (``source`` names it in messages).

    Every field a reader of the run uses is checked here, by type and range, so that a malformed
    file is one :class:`InputFileError` naming the file, the entry, the field and what is expected;
    and a file holds one entry per shape and configuration.
    """
    if not isinstance(data, dict):
        raise InputFileError(f"{source}: expected a JSON object written by --json, found {_kind(data)}")
    benchmarks = data.get("benchmarks")
    if not isinstance(benchmarks, list):
        raise InputFileError(f"{source}: not a cublas_det --json file (no 'benchmarks' list)")
    machine_info = _check_fields(data, f"{source}:", {"machine_info": "an object"}).get("machine_info") or {}
    _check_machine(machine_info, f"{source}: machine_info")
    _check_section(data.get("cublas_det"), f"{source}: cublas_det")
    entries = tuple(_entry(raw, i, source) for i, raw in enumerate(benchmarks))
    first: dict = {}
    for index, entry in enumerate(entries):
        other = first.setdefault(entry.key, index)
        if other != index:
            raise InputFileError(f"{source}: benchmarks[{other}] {entries[other].name!r} and benchmarks[{index}] "
                                 f"{entry.name!r} are both {entry.shape_name} in {entry.config}: a run holds one "
                                 "entry per shape and configuration; keep one of them")
    return Run(source, machine_info, str(data.get("version", "?")), str(data.get("datetime", "?")), entries, data)


def _entry(raw, index: int, source: str) -> Entry:
    where = f"{source}: benchmarks[{index}]"
    if not isinstance(raw, dict):
        raise InputFileError(f"{where}: expected an object, found {_kind(raw)}")
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise InputFileError(f"{where}: no 'name' string")
    where = f"{source}: benchmark {name!r}"
    info = raw.get("extra_info")
    if not isinstance(info, dict):
        raise InputFileError(f"{where}: 'extra_info' must be an object, found {_kind(info)}")
    shape = info.get("shape")
    if not isinstance(shape, dict):
        raise InputFileError(f"{where}: no extra_info.shape: not written by cublas_det (a pytest-benchmark file of "
                             "another project?)")
    _check_fields(raw, f"{where}:", {"group": "a string", "params": "an object"})
    _check_fields(shape, f"{where}: extra_info.shape", _SHAPE, required=("m", "n", "k", "cublas_op"))
    spec = f"{shape['m']}x{shape['n']}x{shape['k']}:{shape['cublas_op'].lower()}"
    _check_fields(info, f"{where}: extra_info", _EXTRA_INFO)
    interval = info.get("median_ci_s")
    if interval is not None and (len(interval) != 2 or interval[0] > interval[1]):
        raise InputFileError(f"{where}: extra_info.median_ci_s: expected [low, high] seconds, low <= high, found "
                             f"{interval[:3]}")
    params = raw.get("params") or {}
    config = (info.get("config") or {}).get("name") or params.get("mode")
    if not isinstance(config, str) or not config:
        raise InputFileError(f"{where}: no configuration (extra_info.config.name or params.mode)")
    stats = raw.get("stats")
    if isinstance(stats, dict) and stats.get("rounds") == 0 and not stats.get("data"):
        stats = None  # not timed: pytest-benchmark needs every stats field, so --json writes them with 0 rounds
    if stats is not None:
        if not isinstance(stats, dict):
            raise InputFileError(f"{where}: stats: must be an object or null, found {_kind(stats)}")
        _check_fields(stats, f"{where}: stats", _STATS, required=("median",))
    if info.get("eager_stats") is not None:
        _check_fields(info["eager_stats"], f"{where}: extra_info.eager_stats", _STATS)
    identity = info.get("identity")
    if identity is not None:
        _check_fields(identity, f"{where}: extra_info.identity", _IDENTITY)
    for position, scenario in enumerate(info.get("scenarios") or ()):
        _check_fields(scenario, f"{where}: extra_info.scenarios[{position}]", _SCENARIO, required=("scenario",))
    digests = frozenset((info.get("device_digests") or {}).values()) or frozenset({info.get("digest")} - {None, ""})
    return Entry(name, raw.get("group") or shape.get("name") or spec, spec, config, digests, identity, stats, info)


# -- what each field must be -------------------------------------------------------------------
def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _positive(value) -> bool:
    return _is_number(value) and math.isfinite(value) and value > 0


def _at_least_zero(value) -> bool:
    return _is_number(value) and math.isfinite(value) and value >= 0


# Each expectation, in the words an error says it in; a field that is null or absent is not checked
# (every field is optional unless a caller says otherwise: files of earlier versions lack many).
_EXPECTED = {
    "an object": lambda v: isinstance(v, dict),
    "a list": lambda v: isinstance(v, list),
    "a string": lambda v: isinstance(v, str),
    "true or false": lambda v: isinstance(v, bool),
    "an integer": _is_int,
    "an integer >= 0": lambda v: _is_int(v) and v >= 0,
    "a positive integer": lambda v: _is_int(v) and v > 0,
    "a number": _is_number,  # NaN included: a check that failed has no error against float64
    "a finite number >= 0": _at_least_zero,
    "a positive number": _positive,
    "a positive number of seconds": _positive,
}
# Lists and objects of one kind: each item is checked, and an error names the item.
_ITEMS = {"a list of positive numbers of seconds": (list, "a positive number of seconds"),
          "a list of integers >= 0": (list, "an integer >= 0"),
          "a list of integers": (list, "an integer"),
          "a list of strings": (list, "a string"),
          "a list of objects": (list, "an object"),
          "an object of strings": (dict, "a string"),
          "an object of objects": (dict, "an object"),
          "an object of lists": (dict, "a list"),
          "an object of integers >= 0": (dict, "an integer >= 0")}
_SHAPE = {"name": "a string", "m": "a positive integer", "n": "a positive integer", "k": "a positive integer",
          "cublas_op": "a string", "trans_a": "true or false", "trans_b": "true or false", "layer": "a string",
          "gemm_pass": "a string", "preset": "a string", "tokens": "an integer >= 0"}
_EXTRA_INFO = {"identity": "an object", "config": "an object", "digest": "a string",
               "device_digests": "an object of strings", "device_errors": "an object of strings",
               "mode_source": "a string", "error": "a string", "rel_error": "a number", "scenarios": "a list of objects",
               "eager_stats": "an object", "kernels": "an object", "calls_per_batch": "an integer >= 0",
               "buffer_sets": "a positive integer", "timing_elapsed_s": "a finite number >= 0",
               "median_ci_s": "a list of positive numbers of seconds", "sm_clock_mhz": "a positive number",
               "kernel_time_s": "a positive number", "timed_kernels": "a string", "setups": "a list of integers >= 0",
               "stop_reason": "a string", "untrusted_reason": "a string", "noise_floor": "a finite number >= 0",
               "timing_trusted": "true or false"}
_STATS = {"median": "a positive number of seconds", "data": "a list of positive numbers of seconds",
          "rounds": "an integer >= 0", "q1": "a positive number of seconds", "q3": "a positive number of seconds", "iterations": "an integer >= 0"}
_IDENTITY = {"seed": "an integer >= 0", "inputs": "an object of strings", "tokens": "an integer >= 0",
             "numpy": "a string", "preset": "a string"}
_SCENARIO = {"scenario": "a string", "kind": "a string", "runs": "an integer >= 0",
             "differing_runs": "an integer >= 0", "mismatched_elements": "an integer >= 0",
             "total_elements": "an integer >= 0", "max_abs_diff": "a number", "max_ulp": "an integer >= 0",
             "index": "a list of integers", "detail": "a string", "extra": "an object", "error": "a string",
             "not_applicable": "a string"}
_MACHINE = {"gpu": "an object", "env": "an object", "gpu_state": "an object", "devices": "a list of objects"}
_GPU = {"name": "a string", "sm_count": "a positive integer"}
_DEVICE = {"device_id": "an integer >= 0", "provenance": "an object", "error": "a string"}
_SECTION = {"sweep": "true or false", "interrupted": "true or false", "wall_s": "a finite number >= 0",
            "ratios": "an object of lists", "timing": "an object of objects", "summary": "a list of strings",
            "warnings": "a list of strings"}
_RATIO = {"numerator": "a string", "denominator": "a string", "median": "a positive number",
          "ci_low": "a positive number", "ci_high": "a positive number", "rounds": "an integer >= 0",
          "setup_half_width": "a finite number >= 0"}
_TIMING = {"stop_reason": "a string", "discards": "an object of integers >= 0", "clock_floor_mhz": "a positive number",
           "options": "an object"}


def _check_fields(record, where: str, fields: dict, required=(), *, null: bool = True) -> dict:
    """``record`` (an object) with each of ``fields`` that is present as expected; ``required`` ones present;
    ``null``: a field may be null (as our writers write what they do not know)."""
    if not isinstance(record, dict):
        raise InputFileError(f"{where}: expected an object, found {_kind(record)}")
    where += " " if where.endswith(":") else "."  # "run.json: machine_info", "...: extra_info.digest"
    for key, expected in fields.items():
        value = record.get(key)
        if value is None:
            if key in record and not null:
                raise InputFileError(f"{where}{key}: expected {expected}, found null")
            if key in required:
                raise InputFileError(f"{where}{key}: missing; expected {expected}")
            continue
        container, item = _ITEMS.get(expected, (None, None))
        if container is None:
            if not _EXPECTED[expected](value):
                raise InputFileError(f"{where}{key}: expected {expected}, found {_found(value)}")
            continue
        if not isinstance(value, container):
            raise InputFileError(f"{where}{key}: expected {expected}, found {_found(value)}")
        for name, element in (value.items() if container is dict else enumerate(value)):
            if not _EXPECTED[item](element):
                raise InputFileError(f"{where}{key}[{name!r}]: expected {item}, found {_found(element)}")
    return record


def _check_machine(info: dict, where: str, devices: bool = True) -> None:
    """What the reports say of a machine (its provenance): objects, never null, where they read fields;
    with ``devices``, the provenance of each device of a sweep too."""
    _check_fields(info, where, _MACHINE, null=False)
    if info.get("gpu"):
        _check_fields(info["gpu"], f"{where}.gpu", _GPU, null=False)
    for index, device in enumerate(info.get("devices") or () if devices else ()):
        _check_fields(device, f"{where}.devices[{index}]", _DEVICE, required=("device_id",))
        if device.get("provenance"):
            _check_machine(device["provenance"], f"{where}.devices[{index}].provenance", devices=False)


def _check_section(section, where: str) -> None:
    """The file's ``cublas_det`` object: the run's facts beside pytest-benchmark's layout."""
    if section is None:
        return
    _check_fields(section, where, _SECTION)
    for name, ratios in (section.get("ratios") or {}).items():
        _check_fields({name: ratios}, f"{where}.ratios", {name: "a list of objects"})
        for index, ratio in enumerate(ratios):
            _check_fields(ratio, f"{where}.ratios[{name!r}][{index}]", _RATIO,
                          required=("numerator", "denominator", "median", "ci_low", "ci_high"))
    for name, timing in (section.get("timing") or {}).items():
        _check_fields(timing, f"{where}.timing[{name!r}]", _TIMING)


def _kind(value) -> str:
    return "null" if value is None else f"a {type(value).__name__}"


def _found(value) -> str:
    """A wrong value as an error shows it: a number or short string itself, else its JSON type."""
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return f"a list of {len(value)}" if value and all(not isinstance(x, (dict, list)) for x in value) else "a list"
    text = repr(value)
    return text if len(text) <= 40 else f"a string of {len(value):,} characters"
