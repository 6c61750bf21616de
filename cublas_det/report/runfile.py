"""A run's ``--json`` file, written and read back: one schema in one place.

Written in pytest-benchmark's layout (``pytest-benchmark compare`` reads it): every entry has the stats
fields pytest-benchmark writes, computed its way, in seconds per GEMM with ``iterations`` = GEMMs per
sample; an entry that was not timed has the same fields with ``rounds`` 0. Read back entry by entry,
every field a reader uses checked by type and range: a malformed file is one
:class:`~cublas_det.errors.InputFileError` naming the file, the entry and the field, before any GPU
work. Files of cublas_det 0.1 carry no identity (seed, T, input digests): they are read, and
:attr:`StoredRun.legacy` says so. :func:`bench_result` turns a stored run back into the results it was
rendered from (``cublas-det report``).
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import math
import statistics
from bisect import bisect_left, bisect_right

from ..check.results import CallKernels, GemmCheck, ScenarioResult
from ..check.scenarios import REGISTRY
from ..check.scenarios.batch import not_applicable_reason
from ..config import GemmConfig
from ..errors import InputFileError
from ..store.files import open_regular, parse_json
from ..shapes import PRESETS, GemmShape, preset
from ..timing import ArmTiming, Ratio, ShapeTiming
from ..timing.results import Discards
from ..words import plural
from .commit_info import commit_info
from .results import BenchResult, ShapeReport
from .text import summary_lines, warnings_for
from .verdicts import check_failures, modes_group

# -- reading
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
class StoredRun:
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


def load_run(path: str, suite_advice: str | None = None) -> StoredRun:
    """Read and check a ``--json`` file; :class:`InputFileError` (one line) on any trouble. ``suite_advice``:
    what to tell a user who gave the pytest-benchmark suite's file instead (the line names that file)."""
    try:
        return _load_run(path)
    except InputFileError:
        if suite_advice and is_suite_file(path):
            raise InputFileError(f"{path}: a file of python -m pytest bench/, not a --json run of python -m "
                                 f"cublas_det.bench; {suite_advice}") from None
        raise


def _load_run(path: str) -> StoredRun:
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


def run_from_dict(data, source: str) -> StoredRun:
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
    return StoredRun(source, machine_info, str(data.get("version", "?")), str(data.get("datetime", "?")), entries, data)


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
    batch = shape.get("batch", 1)  # files before batched shapes have none: one matrix
    spec = f"{shape['m']}x{shape['n']}x{shape['k']}:{shape['cublas_op'].lower()}" + (f":b{batch}" if batch > 1 else "")
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
          "gemm_pass": "a string", "preset": "a string", "tokens": "an integer >= 0", "batch": "a positive integer"}
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
_IDENTITY = {"seed": "an integer >= 0", "inputs": "an object of strings", "tokens": "an integer >= 0", "batch": "a positive integer",
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


# -- writing
STATS_FIELDS = ("min", "max", "mean", "stddev", "rounds", "median", "iqr", "q1", "q3", "iqr_outliers",
                "stddev_outliers", "outliers", "ld15iqr", "hd15iqr", "ops", "total", "data", "iterations")
TIMER = "CUDA events around a CUDA-graph batch, queued behind a blocking kernel"


def identity(shape, config_name: str, seed: int | None, input_digests: dict | None, numpy_version: str | None) -> dict:
    """What makes two results comparable: the GEMM, its configuration, its preset and T, the seed, the
    sha256 digests of the inputs, and the NumPy that made them (its seeded stream is promised per build)."""
    return {"m": shape.m, "n": shape.n, "k": shape.k, "op": shape.cublas_op, **({"batch": shape.batch} if shape.batch > 1
                                                                                else {}),
            "config": config_name, "preset": shape.preset, "tokens": shape.tokens, "seed": seed,
            "inputs": input_digests or None, "numpy": numpy_version}


def benchmark_entry(shape, mode: str, stats: dict | None, extra_info: dict, options: dict | None = None) -> dict:
    """One shape in one configuration as a pytest-benchmark entry; --compare matches entries by ``name``.

    ``stats`` None (not timed) becomes :func:`empty_stats`, which pytest-benchmark still loads.
    """
    return {"group": shape.name, "name": f"{shape.name}[{mode}]",
            "fullname": f"cublas_det.bench::{shape.name}[{mode}]", "params": {"shape": shape.spec, "mode": mode},
            "param": mode, "stats": stats if stats is not None else empty_stats(), "options": options or {},
            "extra_info": extra_info}


def _quartile(data: list, rounds: int, upper: bool) -> float:
    """pytest-benchmark's q1/q3: Wikipedia's method 3 for an odd count, method 2 (medians of halves) for even."""
    if rounds == 1:
        return data[0]
    if rounds % 2:
        n, q = rounds // 4, rounds % 4
        if not upper:
            return 0.25 * data[n - 1] + 0.75 * data[n] if q == 1 else 0.75 * data[n] + 0.25 * data[n + 1]
        return (0.75 * data[3 * n] + 0.25 * data[3 * n + 1] if q == 1
                else 0.25 * data[3 * n + 1] + 0.75 * data[3 * n + 2])
    return statistics.median(data[rounds // 2:] if upper else data[:rounds // 2])


def stats(samples_us, iterations: int = 1) -> dict:
    """pytest-benchmark's stats of per-call times in µs, in seconds; ``iterations``: calls per sample."""
    data = [x * 1e-6 for x in samples_us]
    if not data:
        raise ValueError("no samples")
    ordered = sorted(data)
    rounds = len(data)
    mean = statistics.mean(data)
    stddev = statistics.stdev(data) if rounds > 1 else 0.0
    q1, q3 = _quartile(ordered, rounds, False), _quartile(ordered, rounds, True)
    iqr = q3 - q1
    stddev_outliers = sum(not mean - stddev <= x <= mean + stddev for x in data)
    iqr_outliers = sum(not q1 - 1.5 * iqr <= x <= q3 + 1.5 * iqr for x in data)
    if rounds == 1:
        ld15iqr = hd15iqr = data[0]
    else:
        ld15iqr = ordered[bisect_left(ordered, q1 - 1.5 * iqr)]
        # The highest datum within the fence (bisect_right is past it), as pytest-benchmark 5.3.1 fixed it.
        hd15iqr = ordered[bisect_right(ordered, q3 + 1.5 * iqr) - 1]
    total = sum(data)
    return {"min": ordered[0], "max": ordered[-1], "mean": mean, "stddev": stddev, "rounds": rounds,
            "median": statistics.median(data), "iqr": iqr, "q1": q1, "q3": q3, "iqr_outliers": iqr_outliers,
            "stddev_outliers": stddev_outliers, "outliers": f"{stddev_outliers};{iqr_outliers}",
            "ld15iqr": ld15iqr, "hd15iqr": hd15iqr, "ops": rounds / total if total else 0.0, "total": total,
            "data": data, "iterations": iterations}


def empty_stats() -> dict:
    """The stats of an entry that was not timed: every field, zero rounds, no data."""
    return {**{field: 0.0 for field in STATS_FIELDS}, "rounds": 0, "iqr_outliers": 0, "stddev_outliers": 0,
            "outliers": "0;0", "data": [], "iterations": 0}


def timing_options(timing) -> dict:
    """pytest-benchmark's ``options`` of a timed entry: how its samples were taken."""
    return {"timer": TIMER, "disable_gc": False, "min_time": 1e-3, "warmup": True,
            "min_rounds": timing.options.get("min_rounds"), "max_rounds": timing.options.get("max_rounds"),
            "max_time": timing.options.get("budget_s")}


def timing_extra(timing, mode: str) -> dict:
    """The timing facts of one arm for ``extra_info``: its interval, clock, the shape's trust and stop."""
    arm = timing.arm(mode)
    low, high = arm.median_ci_us
    kernels = {"kernel_time_s": arm.kernel_us * 1e-6, "timed_kernels": arm.kernels} if arm.kernel_us else {}
    setups = {"setups": list(arm.setups)} if arm.setups else {}  # of each sample in stats.data, in order
    return {**kernels, **setups, "median_ci_s": [low * 1e-6, high * 1e-6], "sm_clock_mhz": arm.median_clock_mhz,
            "stop_reason": timing.stop_reason, "timing_trusted": timing.trusted,
            "untrusted_reason": timing.untrusted_reason, "noise_floor": timing.noise_floor}


def to_json(result: BenchResult) -> dict:
    benchmarks = []
    for report in result.shapes:
        modes = list(report.checks)
        if report.timing:  # the arms no check covers, the A/A control included
            modes += [a.name for a in report.timing.arms if a.name not in modes]
        for mode in modes:
            check = report.checks.get(mode)
            arm = report.timing.arm(mode) if report.timing else None
            pedantic = report.timing.arm_name("PEDANTIC") if report.timing else None
            ratio = report.timing.ratio(mode, pedantic) if pedantic else None
            calls = report.timing.calls_per_batch if report.timing else None
            benchmarks.append(benchmark_entry(report.shape, mode, stats(arm.graph_us, calls) if arm else None, {
                "shape": report.shape.to_dict(),
                "identity": identity(report.shape, mode, check.seed if check else result.seed,
                                     check.input_digests if check else None,
                                     result.provenance.get("numpy_version")),
                "mode_source": check.mode_source if check else None,
                "config": check.config.to_dict() if check else None,
                "digest": check.digest if check else None,
                "rel_error": check.rel_error if check else None,
                "reproducible": check.verdict.value if check else None,
                "failures": check_failures(check) if check else [],
                "findings": [r.scenario for r in check.findings] if check else [],
                "same_bits_as": modes_group(check) if check else None,
                "scenarios": [r.to_dict() for r in check.scenarios] if check else [],
                **({"kernels": check.kernels.to_dict()} if check and check.kernels else {}),
                "eager_stats": stats(arm.eager_us, calls) if arm else None,
                "calls_per_batch": calls,
                "buffer_sets": report.timing.buffer_sets if report.timing else None,
                "timing_elapsed_s": report.timing.elapsed_s if report.timing else None,
                "ratio_to_pedantic": ratio.to_dict() if ratio else None,
                **(timing_extra(report.timing, mode) if arm else {}),
                "error": report.error or (check.error if check else None),
            }, timing_options(report.timing) if arm else None))
    ratios = {r.shape.name: [x.to_dict() for x in r.timing.ratios] for r in result.shapes if r.timing}
    timing = {r.shape.name: {k: v for k, v in r.timing.to_dict().items() if k not in ("arms", "ratios")}
              for r in result.shapes if r.timing}
    return {"machine_info": result.provenance, "commit_info": commit_info(), "benchmarks": benchmarks,
            "datetime": result.started, "version": result.version, "cublas_det": {
                "wall_s": result.wall_s, "phases_s": {name: round(s, 3) for name, s in result.phases.items()},
                "interrupted": result.interrupted, "ratios": ratios, "timing": timing,
                "summary": summary_lines(result), "warnings": warnings_for(result)}}


def now_iso() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


# -- back to results
def bench_result(run: StoredRun) -> BenchResult:
    """The :class:`BenchResult` a stored benchmark run was written from.

    :func:`~cublas_det.report.runfile.run_from_dict` checked each field's type; what only the result types
    can tell (a math mode or scenario this version does not know) is one line naming the field here.
    """
    if run.sweep:
        raise InputFileError(f"{run.source}: a --devices sweep has no per-mode tables to render; compare it with "
                             "cublas-det compare")
    groups: dict[str, list[Entry]] = {}
    for entry in run.entries:
        groups.setdefault(entry.shape_name, []).append(entry)
    info = run.data.get("cublas_det") or {}
    ratios = info.get("ratios") or {}
    timings = info.get("timing") or {}
    reports = tuple(_shape_report(name, entries, run, ratios.get(name) or [], timings.get(name) or {})
                    for name, entries in groups.items())
    seeds = {(e.identity or {}).get("seed") for e in run.entries} - {None}
    return BenchResult(reports, run.machine_info, run.datetime, float(info.get("wall_s") or 0.0), run.version,
                       bool(info.get("interrupted")), seeds.pop() if len(seeds) == 1 else None)


def _read_back(where: str, read, data):
    """``read(data)``, or one line naming ``where`` when the stored value is not one this version reads."""
    try:
        return read(data)
    except KeyError as err:
        raise InputFileError(f"{where}: cannot be read back (missing or unknown {err})") from None
    except (TypeError, ValueError) as err:
        raise InputFileError(f"{where}: cannot be read back ({err})") from None


def _known_fields(cls, data: dict) -> dict:
    """The keys of ``data`` that dataclass ``cls`` has: fields written by other versions are left out."""
    names = {field.name for field in dataclasses.fields(cls)}
    return {key: value for key, value in data.items() if key in names}


def _shape_report(name: str, entries: list[Entry], run: StoredRun, ratios: list, how: dict) -> ShapeReport:
    """``how``: the file's record of how the shape was timed (stop reason, discarded rounds, clock floor, options)."""
    where = f"{run.source}: benchmark {entries[0].name!r}: extra_info.shape"
    shape = _catalogue_shape(_read_back(where, GemmShape.from_dict, entries[0].extra_info["shape"]))
    checks = {e.config: _check(shape, e, run) for e in entries if e.extra_info.get("scenarios")}
    for e in entries:
        if e.stats and e.stats.get("data") and not (e.extra_info.get("eager_stats") or {}).get("data"):
            raise InputFileError(f"{run.source}: benchmark {e.name!r}: extra_info.eager_stats.data: missing; a timed "
                                 "entry has its eager times too")
    arms = tuple(ArmTiming(e.config, tuple(x * 1e6 for x in e.stats["data"]),
                           tuple(x * 1e6 for x in (e.extra_info.get("eager_stats") or {}).get("data") or ()),
                           # the file keeps the median SM clock of an arm, not each batch's
                           (e.extra_info["sm_clock_mhz"],) if e.extra_info.get("sm_clock_mhz") else (),
                           kernel_us=e.extra_info["kernel_time_s"] * 1e6 if e.extra_info.get("kernel_time_s") else None,
                           kernels=e.extra_info.get("timed_kernels") or "",
                           setups=tuple(e.extra_info.get("setups") or ()))
                 for e in entries if e.stats and e.stats.get("data"))
    timing = None
    if arms:
        info = entries[0].extra_info
        where = f"{run.source}: cublas_det"
        timing = ShapeTiming(name, shape.flop, int(info.get("calls_per_batch") or 0), int(info.get("buffer_sets") or 1),
                             len(arms[0].graph_us), arms,
                             tuple(_read_back(f"{where}.ratios[{name!r}]", lambda r: Ratio(**_known_fields(Ratio, r)), r)
                                   for r in ratios),
                             float(info.get("timing_elapsed_s") or 0.0), how.get("stop_reason") or "",
                             Discards(**_known_fields(Discards, how.get("discards") or {})), how.get("clock_floor_mhz"),
                             options=how.get("options") or {})
    errors = {e.extra_info.get("error") for e in entries} - {None}
    return ShapeReport(shape, checks, timing, "; ".join(sorted(errors)) or None)


def _check(shape: GemmShape, entry: Entry, run: StoredRun) -> GemmCheck:
    info = entry.extra_info
    where = f"{run.source}: benchmark {entry.name!r}: extra_info"
    if info.get("config"):
        config = _read_back(f"{where}.config", GemmConfig.from_dict, info["config"])
    else:
        config = _read_back(f"{where}: configuration", GemmConfig.parse, entry.config)
    results = tuple(_read_back(f"{where}.scenarios[{i}]", lambda r: _scenario(r, shape), raw)
                    for i, raw in enumerate(info["scenarios"]))
    rel_error = info.get("rel_error")
    identity = entry.identity or {}
    # A check whose GEMM could not be computed has no digest and the error; its verdict is "error"
    # even when only hazard scenarios were asked (with no guarantee it would read "not checked").
    error = info.get("error") if not info.get("digest") else None
    return GemmCheck(shape, config, info.get("mode_source") or "argument", int(identity.get("seed") or 0),
                     info.get("digest") or "", float("nan") if rel_error is None else float(rel_error), results,
                     run.machine_info, error=error, input_digests=identity.get("inputs") or {},
                     kernels=_read_back(f"{where}.kernels", CallKernels.from_dict, info["kernels"])
                     if info.get("kernels") else None)


def _scenario(raw: dict, shape: GemmShape) -> ScenarioResult:
    if raw["scenario"] not in REGISTRY:  # the reports lay scenarios out in the registry's order
        raise ValueError(f"scenario {raw['scenario']!r} is not one this version knows ({', '.join(REGISTRY)})")
    # 0.1 files: the registry knows the kind
    result = ScenarioResult.from_dict({**raw, "kind": raw.get("kind") or REGISTRY[raw["scenario"]].kind})
    if _untold_workspace_config(raw):
        return dataclasses.replace(result, runs=0, differing_runs=0, detail=f"{UNTOLD_WORKSPACE_CONFIG}; the file "
                                   f"says {raw['differing_runs']}/{raw['runs']} runs differ")
    if _untold_batch(raw, shape):
        return dataclasses.replace(result, not_applicable=not_applicable_reason(shape))
    return result


# -- what a file of an earlier version cannot tell ------------------------------------------------
NO_IDENTITY = "no seed, T or input digests"
UNTOLD_WORKSPACE_CONFIG = ("not told: the checker compared the worker's streams with the worker's own first output, "
                           "whose operands could still be in flight")


def _untold_workspace_config(raw: dict) -> bool:
    """A workspace-config difference recorded before the worker's first output was checked against this
    process's bits (``reference_digest``) and before operands were complete before use: that first
    output could read operands still being copied, so the difference may be in it, not in the streams."""
    return (raw["scenario"] == "workspace-config" and bool(raw.get("differing_runs")) and not raw.get("error")
            and "reference_digest" not in (raw.get("extra") or {}))


def _untold_batch(raw: dict, shape: GemmShape) -> bool:
    """batch-invariance run by an earlier version on a dW GEMM, where it does not apply."""
    return (raw["scenario"] == "batch-invariance" and not raw.get("not_applicable") and not raw.get("error")
            and shape.gemm_pass == "dW")


def _catalogue_shape(shape: GemmShape) -> GemmShape:
    """The catalogue's shape of a file that did not record its preset (cublas_det 0.1), when its name and
    dimensions are the catalogue's; else the shape as stored."""
    prefix = shape.name.split("/", 1)[0]
    if shape.preset or prefix not in PRESETS or not shape.gemm_pass:
        return shape
    try:
        found = preset(prefix, shape.k if shape.gemm_pass == "dW" else shape.m)
    except ValueError:
        return shape
    same = [s for s in found if s.name == shape.name and (s.m, s.n, s.k, s.trans_a, s.trans_b) == (
        shape.m, shape.n, shape.k, shape.trans_a, shape.trans_b)]
    return dataclasses.replace(same[0], batch=shape.batch) if same else shape


def old_file_limits(run: StoredRun) -> list[str]:
    """What a file of an earlier version cannot tell, a phrase each; empty for a file of this version."""
    limits = [f"the inputs it ran on ({NO_IDENTITY} recorded)"] if run.legacy else []
    untold, batch = [], 0
    for entry in run.entries:
        shape = GemmShape.from_dict(entry.extra_info["shape"]) if entry.extra_info.get("scenarios") else None
        for raw in entry.extra_info.get("scenarios") or ():
            untold += [entry.name] if _untold_workspace_config(raw) else []
            batch += _untold_batch(raw, shape)
    if untold:
        named = ", ".join(untold[:3]) + (", ..." if len(untold) > 3 else "")
        limits.append(f"workspace config in {named} (a difference from the worker's own first output, whose operands "
                      "could still be in flight: not counted)")
    if batch:
        limits.append(f"batch size in {plural(batch, 'dW result')} (run there, though their batch is the reduction "
                      "axis: not counted)")
    return limits


def old_file_note(run: StoredRun) -> str | None:
    """``note: run.json was written by cublas_det 0.1.0, which cannot tell: ...``, or None."""
    limits = old_file_limits(run)
    return (f"note: {run.source} was written by cublas_det {run.version}, which cannot tell: {'; '.join(limits)}"
            if limits else None)


def stored_ratios(run: StoredRun, numerator: str, denominator: str) -> dict:
    """{shape name: (Ratio, setups)} of a stored bench run's ``numerator``/``denominator`` ratios, with the
    number of setups (visits) its interval was taken over; :class:`InputFileError` (one line) when the
    run has none, or one that cannot be a time ratio."""
    found = {}
    for report in bench_result(run).shapes:
        timing = report.timing
        for ratio in (timing.ratios if timing else ()):
            if (ratio.numerator, ratio.denominator) == (numerator, denominator):
                if ratio.median <= 0:
                    raise InputFileError(f"{run.source}: {report.shape.name}: a {numerator}/{denominator} ratio of "
                                         f"{ratio.median} cannot be a time ratio")
                found[report.shape.name] = (ratio, int(timing.options.get("setups") or 1))
    if not found:
        raise InputFileError(f"{run.source}: no {numerator}/{denominator} ratio (a --no-timing run, or other modes)")
    return found
