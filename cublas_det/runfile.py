"""Reading a stored run (a ``--json`` file) for comparison and re-rendering, checked entry by entry.

A malformed file is one :class:`~cublas_det.errors.InputFileError` naming the file, the entry and
the field, before any GPU work. Files of cublas_det 0.1 carry no identity (seed, T, input digests):
they are read, and :attr:`Run.legacy` says so, so that comparisons can say what they could not check.
"""

from __future__ import annotations

import dataclasses
import json
import math

from .errors import InputFileError


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
    try:
        with open(path) as file:
            data = json.load(file)
    except FileNotFoundError:
        raise InputFileError(f"{path}: no such file; give the path of a file written by --json") from None
    except IsADirectoryError:
        raise InputFileError(f"{path}: is a directory; give the path of a file written by --json") from None
    except OSError as err:
        raise InputFileError(f"{path}: cannot be read ({err.strerror or err})") from None
    except UnicodeDecodeError:
        raise InputFileError(f"{path}: not a text file; give a file written by --json") from None
    except json.JSONDecodeError as err:
        raise InputFileError(f"{path}: not JSON ({err.msg} at line {err.lineno}, column {err.colno}); "
                             "the file may be truncated") from None
    return run_from_dict(data, path)


def is_suite_file(path: str) -> bool:
    """Whether ``path`` is a file of the pytest-benchmark suite (``pytest bench/ --benchmark-json``), which
    :func:`load_run` refuses: what to tell a user who gave it where a ``--json`` run was wanted."""
    try:
        with open(path) as file:
            return is_suite_data(json.load(file))
    except (OSError, ValueError):
        return False


def is_suite_data(data) -> bool:
    """Whether parsed JSON is the pytest-benchmark suite's: its entries carry ``gemms_per_sample``."""
    benchmarks = data.get("benchmarks") if isinstance(data, dict) else None
    return isinstance(benchmarks, list) and any(
        "gemms_per_sample" in (b.get("extra_info") or {}) for b in benchmarks if isinstance(b, dict))


def run_from_dict(data, source: str) -> Run:
    """Check a run's layout and read its entries (``source`` names it in messages)."""
    if not isinstance(data, dict):
        raise InputFileError(f"{source}: expected a JSON object written by --json, found a {type(data).__name__}")
    benchmarks = data.get("benchmarks")
    if not isinstance(benchmarks, list):
        raise InputFileError(f"{source}: not a cublas_det --json file (no 'benchmarks' list)")
    machine_info = data.get("machine_info") or {}
    if not isinstance(machine_info, dict):
        raise InputFileError(f"{source}: 'machine_info' must be an object, not {type(machine_info).__name__}")
    entries = tuple(_entry(raw, i, source) for i, raw in enumerate(benchmarks))
    return Run(source, machine_info, str(data.get("version", "?")), str(data.get("datetime", "?")), entries, data)


def _entry(raw, index: int, source: str) -> Entry:
    where = f"{source}: benchmarks[{index}]"
    if not isinstance(raw, dict):
        raise InputFileError(f"{where}: expected an object, found a {type(raw).__name__}")
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
    try:
        spec = f"{int(shape['m'])}x{int(shape['n'])}x{int(shape['k'])}:{str(shape['cublas_op']).lower()}"
    except (KeyError, TypeError, ValueError):
        raise InputFileError(f"{where}: extra_info.shape needs integers m, n, k and a cublas_op") from None
    params = raw.get("params") if isinstance(raw.get("params"), dict) else {}
    config = (info.get("config") or {}).get("name") if isinstance(info.get("config"), dict) else None
    config = config or params.get("mode")
    if not isinstance(config, str) or not config:
        raise InputFileError(f"{where}: no configuration (extra_info.config.name or params.mode)")
    stats = raw.get("stats")
    if isinstance(stats, dict) and stats.get("rounds") == 0 and not stats.get("data"):
        stats = None  # not timed: pytest-benchmark needs every stats field, so --json writes them with 0 rounds
    if stats is not None:
        _check_stats(stats, f"{where}: stats")
    identity = info.get("identity")
    if identity is not None and not isinstance(identity, dict):
        raise InputFileError(f"{where}: extra_info.identity must be an object, found {_kind(identity)}")
    return Entry(name, str(raw.get("group") or shape.get("name") or spec), spec, config, _digests(info, where),
                 identity, stats, info)


def _check_stats(stats, where: str) -> None:
    if not isinstance(stats, dict):
        raise InputFileError(f"{where}: must be an object or null, found {_kind(stats)}")
    median = stats.get("median")
    if isinstance(median, bool) or not isinstance(median, (int, float)) or not math.isfinite(median) or median <= 0:
        raise InputFileError(f"{where}.median: expected a positive number of seconds, found {median!r}")
    data = stats.get("data")
    if data is not None and (not isinstance(data, list) or not all(
            isinstance(x, (int, float)) and not isinstance(x, bool) for x in data)):
        raise InputFileError(f"{where}.data: expected a list of numbers")


def _digests(info: dict, where: str) -> frozenset:
    per_device = info.get("device_digests")
    if per_device:
        if not isinstance(per_device, dict) or not all(isinstance(d, str) for d in per_device.values()):
            raise InputFileError(f"{where}: extra_info.device_digests must map device ids to digest strings")
        return frozenset(per_device.values())
    digest = info.get("digest")
    if digest is None or digest == "":
        return frozenset()
    if not isinstance(digest, str):
        raise InputFileError(f"{where}: extra_info.digest must be a string, found {_kind(digest)}")
    return frozenset({digest})


def _kind(value) -> str:
    return "null" if value is None else f"a {type(value).__name__}"
