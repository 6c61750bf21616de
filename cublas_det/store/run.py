"""The ``--json`` run file in pytest-benchmark's layout (seconds per GEMM, ``iterations`` = GEMMs per
sample, ``rounds`` 0 when not timed): its entries written, and read back with every field checked."""

from __future__ import annotations

import dataclasses
import datetime
import statistics
from bisect import bisect_left, bisect_right

from ..core.device import describe_machine
from ..base.errors import InputFileError
from ..core.shapes import gemm_key, shape_spec
from ..base.files import read_json
from ..base.schema import Each, Record, check, kind_of
from ..results.stats import quartiles

MAX_RUN_FILE_BYTES = 256 << 20  # far above any run, so only what is no run is refused unread
HINT = "give a file that --json wrote"  # the fix of every error reading one
NO_IDENTITY = "no seed, T or input digests"  # what a file of cublas_det 0.1 lacks (StoredRun.legacy)


@dataclasses.dataclass(frozen=True)
class Entry:
    """One shape in one configuration of a stored run."""

    name: str  # "trunk/W_in/dW[PEDANTIC]"
    shape_name: str
    spec: str  # "128x56x4096:nt": M, N, K and the cuBLAS op
    config: str  # "PEDANTIC"
    digests: frozenset  # one digest, or one per device for a sweep; empty when none was computed
    identity: dict | None  # seed, preset, tokens, input digests; None in files of cublas_det 0.1
    stats: dict | None
    extra_info: dict
    where: str  # "run.json: benchmarks[3]": its path, as an error names it (a field follows a dot)

    @property
    def gemm_key(self) -> str:
        """The GEMM itself (M, N, K, op) in the configuration: pairs a custom shape with a preset's."""
        return gemm_key(self.spec, self.config)

    @property
    def label(self) -> str:
        """``trunk/W_in/dW[PEDANTIC]``: the shape's role (a custom shape's spec) and the configuration, as a new
        entry is named; results of two runs pair on it first, then on :attr:`gemm_key`."""
        return entry_label(self.shape_name, self.config)

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
        """Written by cublas_det 0.1, which recorded no identity (seed, T, input digests)."""
        return any(entry.identity is None for entry in self.entries)

    @property
    def sweep(self) -> bool:
        return bool((self.data.get("cublas_det") or {}).get("sweep"))

    def describe(self) -> str:
        """``NVIDIA H200, 132 SMs, driver 13.0, cuBLAS 13.1.0``: what the bits depend on."""
        return describe_machine(self.machine_info)


def load_run(path: str, suite_advice: str | None = None) -> StoredRun:
    """Read and check a ``--json`` file, else one :class:`InputFileError` line; ``suite_advice``: what to tell
    a user who gave the pytest-benchmark suite's file instead."""
    data = read_json(path, HINT, max_bytes=MAX_RUN_FILE_BYTES, what="--json file")
    try:
        return run_from_dict(data, path)
    except InputFileError:
        if suite_advice and is_suite_data(data):
            raise InputFileError(f"{path}: a file of python -m pytest bench/, not a --json run of python -m "
                                 f"cublas_det.bench; {suite_advice}") from None
        raise


def is_suite_data(data) -> bool:
    """Whether parsed JSON is the pytest-benchmark suite's (entries carry ``gemms_per_sample``)."""
    benchmarks = data.get("benchmarks") if isinstance(data, dict) else None
    return isinstance(benchmarks, list) and any(
        isinstance(b, dict) and isinstance(b.get("extra_info"), dict) and "gemms_per_sample" in b["extra_info"]
        for b in benchmarks)


def run_from_dict(data, source: str) -> StoredRun:
    """Check a run's layout and every field a reader uses, and read its entries."""
    if not isinstance(data, dict):
        raise InputFileError(f"{source}: expected a JSON object written by --json, found {kind_of(data)}")
    benchmarks = data.get("benchmarks")
    if not isinstance(benchmarks, list):
        raise InputFileError(f"{source}: not a cublas_det --json file (no 'benchmarks' list)")
    check(data, f"{source}:", _RUN)
    machine_info = data.get("machine_info") or {}
    entries = tuple(_entry(raw, i, source) for i, raw in enumerate(benchmarks))
    first: dict = {}
    for index, entry in enumerate(entries):
        other = first.setdefault(entry.label, index)
        if other != index:
            raise InputFileError(f"{source}: benchmarks[{other}] {entries[other].name!r} and benchmarks[{index}] "
                                 f"{entry.name!r} are both {entry.shape_name} in {entry.config}: a run holds one "
                                 "entry per shape and configuration; keep one of them")
    return StoredRun(source, machine_info, str(data.get("version", "?")), str(data.get("datetime", "?")), entries, data)


def _entry(raw, index: int, source: str) -> Entry:
    where = f"{source}: benchmarks[{index}]"  # the path, not the name: a line of any entry fits 100 columns
    name = check(raw, where, _NAMED)["name"]
    if isinstance(raw.get("extra_info"), dict) and not isinstance(raw["extra_info"].get("shape"), dict):
        raise InputFileError(f"{where}: no extra_info.shape: not written by cublas_det (a pytest-benchmark file of "
                             "another project?)")
    check(raw, where, _ENTRY)
    info = raw["extra_info"]
    shape = info["shape"]
    spec = shape_spec(shape["m"], shape["n"], shape["k"], shape["cublas_op"], shape.get("batch", 1))  # older: no batch
    config = (info.get("config") or {}).get("name") or (raw.get("params") or {}).get("mode")
    if not isinstance(config, str) or not config:
        raise InputFileError(f"{where}: no configuration (extra_info.config.name or params.mode)")
    named = name.rpartition("[")[2].removesuffix("]") if name.endswith("]") else config  # "shape[CONFIG]"
    if named != config:  # an entry that contradicts itself: which of the two ran is not known
        raise InputFileError(f"{where}: named {named} but configured {config}; give a file that --json wrote")
    stats = raw.get("stats")
    if isinstance(stats, dict) and stats.get("rounds") == 0 and not stats.get("data"):
        stats = None  # not timed: pytest-benchmark needs every stats field, so --json writes them with 0 rounds
    if stats is not None:
        check(stats, f"{where}.stats", _TIMED_STATS)
    digests = frozenset((info.get("device_digests") or {}).values()) or frozenset({info.get("digest")} - {None, ""})
    return Entry(name, raw.get("group") or shape.get("name") or spec, spec, config, digests, info.get("identity"),
                 stats, info, where)


_STATS = Record({"median": "a positive number of seconds", "data": "a list of positive numbers of seconds",
                 "rounds": "an integer >= 0", "q1": "a positive number of seconds",
                 "q3": "a positive number of seconds", "iterations": "an integer >= 0"})
_TIMED_STATS = Record(_STATS.fields, required=("median",))
_SHAPE = Record({"name": "a string", **dict.fromkeys("mnk", "a positive integer"), "cublas_op": "a string",
                 "trans_a": "true or false", "trans_b": "true or false", "layer": "a string", "gemm_pass": "a string",
                 "preset": "a string", "tokens": "an integer >= 0", "batch": "a positive integer"},
                required=("m", "n", "k", "cublas_op"))
_IDENTITY = Record({"seed": "an integer >= 0", "inputs": "an object of strings", "tokens": "an integer >= 0",
                    "batch": "a positive integer", "numpy": "a string", "preset": "a string"})
_SCENARIO = Record({"scenario": "a string", "kind": "a string",
                    **dict.fromkeys(("runs", "differing_runs", "mismatched_elements", "total_elements",
                                     "nan_mismatches", "signed_zero_mismatches"), "an integer >= 0"),
                    "max_abs_diff": "a number", "max_ulp": "an integer >= 0",  # null: none (only NaN pairs differ)
                    "index": "a list of integers", "reference_value": "a number", "actual_value": "a number",
                    "detail": "a string", "extra": "an object", "error": "a string", "not_applicable": "a string"},
                   required=("scenario",))
_EXTRA_INFO = Record({
    "shape": _SHAPE, "identity": _IDENTITY, "config": "an object", "digest": "a string",
    "device_digests": "an object of strings", "device_errors": "an object of strings", "mode_source": "a string",
    "error": "a string", "rel_error": "a number", "scenarios": Each(_SCENARIO), "eager_stats": _STATS,
    "kernels": "an object", "calls_per_batch": "an integer >= 0", "buffer_sets": "a positive integer",
    "timing_elapsed_s": "a finite number >= 0",
    "median_ci_s": Each("a positive number of seconds", phrase="a list of positive numbers of seconds",
                        whole=("[low, high] seconds, low <= high", lambda v: len(v) == 2 and v[0] <= v[1])),
    "sm_clock_mhz": "a positive number", "kernel_time_s": "a positive number", "timed_kernels": "a string",
    "setups": "a list of integers >= 0", "stop_reason": "a string", "untrusted_reason": "a string",
    "noise_floor": "a finite number >= 0", "timing_trusted": "true or false"})
_NAMED = Record({"name": "a non-empty string"}, required=("name",))
_ENTRY = Record({"group": "a string", "params": "an object", "extra_info": _EXTRA_INFO, "stats": "an object"},
                required=("extra_info",))
# What the reports say of a machine (its provenance): objects, never null, where they read fields.
_MACHINE_FIELDS = {"gpu": Record({"name": "a string", "sm_count": "a positive integer"}, null=False),
                   "env": "an object", "gpu_state": "an object"}
_DEVICE = Record({"device_id": "an integer >= 0", "provenance": Record(_MACHINE_FIELDS, null=False),
                  "error": "a string"}, required=("device_id",))
_MACHINE = Record({**_MACHINE_FIELDS, "devices": Each(_DEVICE)}, null=False)
_RATIO = Record({"numerator": "a string", "denominator": "a string",
                 **dict.fromkeys(("median", "ci_low", "ci_high"), "a positive number"), "rounds": "an integer >= 0",
                 "setup_half_width": "a finite number >= 0", "setup_dof": "an integer >= 0"},
                required=("numerator", "denominator", "median", "ci_low", "ci_high"))
_TIMING = Record({"stop_reason": "a string", "discards": "an object of integers >= 0",
                  "clock_floor_mhz": "a positive number", "options": "an object"})
# The file's ``cublas_det`` object: the run's facts beside pytest-benchmark's layout.
_SECTION = Record({"sweep": "true or false", "interrupted": "true or false", "wall_s": "a finite number >= 0",
                   "ratios": Each(Each(_RATIO), dict), "timing": Each(_TIMING, dict),
                   "summary": "a list of strings", "warnings": "a list of strings"})
_RUN = Record({"machine_info": _MACHINE, "cublas_det": _SECTION})


STATS_FIELDS = ("min", "max", "mean", "stddev", "rounds", "median", "iqr", "q1", "q3", "iqr_outliers",
                "stddev_outliers", "outliers", "ld15iqr", "hd15iqr", "ops", "total", "data", "iterations")
TIMER = "CUDA events around a CUDA-graph batch, queued behind a blocking kernel"


def seconds(us: float) -> float:
    """The timing's microseconds as the file's seconds: the file's one conversion, with :func:`micros`."""
    return us * 1e-6


def micros(s: float) -> float:
    return s * 1e6


def identity(shape, config_name: str, seed: int | None, input_digests: dict | None, numpy_version: str | None) -> dict:
    """What makes two results comparable: the GEMM, configuration, preset, T, seed, the inputs' digests and
    the NumPy that made them."""
    batch = {"batch": shape.batch} if shape.batch > 1 else {}
    return {"m": shape.m, "n": shape.n, "k": shape.k, "op": shape.cublas_op, **batch, "config": config_name,
            "preset": shape.preset, "tokens": shape.tokens, "seed": seed, "inputs": input_digests or None,
            "numpy": numpy_version}


def entry_label(shape_name: str, config: str) -> str:
    return f"{shape_name}[{config}]"


def benchmark_entry(shape, mode: str, stats: dict | None, extra_info: dict, options: dict | None = None) -> dict:
    """One shape in one configuration as a pytest-benchmark entry; ``stats`` None: :func:`empty_stats`."""
    label = entry_label(shape.name, mode)
    return {"group": shape.name, "name": label, "fullname": f"cublas_det.bench::{label}",
            "params": {"shape": shape.spec, "mode": mode},
            "param": mode, "stats": stats if stats is not None else empty_stats(), "options": options or {},
            "extra_info": extra_info}


def stats(samples_us, iterations: int = 1) -> dict:
    """pytest-benchmark's stats of per-call times in µs, in seconds; ``iterations``: calls per sample."""
    data = [seconds(x) for x in samples_us]
    if not data:
        raise ValueError("no samples")
    ordered = sorted(data)
    rounds = len(data)
    mean = statistics.mean(data)
    stddev = statistics.stdev(data) if rounds > 1 else 0.0
    q1, median, q3 = quartiles(ordered)
    iqr = q3 - q1
    stddev_outliers = sum(not mean - stddev <= x <= mean + stddev for x in data)
    iqr_outliers = sum(not q1 - 1.5 * iqr <= x <= q3 + 1.5 * iqr for x in data)
    ld15iqr = ordered[bisect_left(ordered, q1 - 1.5 * iqr)]
    # The highest datum within the fence, as pytest-benchmark computes it (bisect_right is past it).
    hd15iqr = ordered[bisect_right(ordered, q3 + 1.5 * iqr) - 1]
    total = sum(data)
    return {"min": ordered[0], "max": ordered[-1], "mean": mean, "stddev": stddev, "rounds": rounds,
            "median": median, "iqr": iqr, "q1": q1, "q3": q3, "iqr_outliers": iqr_outliers,
            "stddev_outliers": stddev_outliers, "outliers": f"{stddev_outliers};{iqr_outliers}",
            "ld15iqr": ld15iqr, "hd15iqr": hd15iqr, "ops": rounds / total if total else 0.0, "total": total,
            "data": data, "iterations": iterations}


def empty_stats() -> dict:
    """The stats of an entry that was not timed: every field, zero rounds, no data."""
    return {**{field: 0.0 for field in STATS_FIELDS}, "rounds": 0, "iqr_outliers": 0, "stddev_outliers": 0,
            "outliers": "0;0", "data": [], "iterations": 0}


def now_iso() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
