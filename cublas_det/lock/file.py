"""The lock file: for each GEMM (keyed by what a caller knows before it multiplies), the verified cuBLASLt
configuration, its algorithm pinned, that keeps its bits, for any M or its own; and where it holds."""

from __future__ import annotations

import collections
import ctypes
import dataclasses
import os
import re

from ..bindings.cublas import ComputeType
from ..bindings.cublaslt import ALGO_CONFIG
from ..core.key import GemmKey
from ..core.config import LT_WORKSPACE_BYTES, GemmConfig
from ..core.device import fingerprint, require_gpu
from ..base.dtypes import GEMM_TYPES
from ..base.errors import InputFileError, UsageError
from ..base.integers import is_int
from ..core.shapes import parse_shape
from ..base.words import plural
from ..base.files import TooLarge, check_format, read_json, write_json
from ..base.schema import Each, Record, check

FORMAT, VERSION = "cublas_det.lock", 1
MAX_FILE_BYTES = 256 << 20  # a capture file's bound: 40,000 entries that prescribe writes are 49 MB
MAX_DIMENSION = 1 << 31  # cuBLASLt's layouts take 64-bit sizes; no GEMM of a lock is larger
HINT = "give a file that `cublas-det prescribe --lock FILE` wrote"
WHERE_FIELDS = ("gpu", "sm_count", "compute_capability", "cublas_version")  # a lock holds only where all agree


class LockMismatch(UsageError):
    """A lock written on another GPU, SM count or cuBLAS: its algorithms may not exist or not keep bits here."""


@dataclasses.dataclass(frozen=True)
class LockEntry:
    key: GemmKey
    config: GemmConfig  # cuBLASLt, the algorithm pinned
    verified: dict  # {"m": M of the check, "rows": [m ...], "sm_count_targets": [...], "streams": 4, "detail": str}
    cost: dict | None = None  # {"against": configuration name, "median": ratio, "ci_low": ..., "ci_high": ...}
    source: str = ""  # the shape it was made from (``mamba2-130m/in_proj/forward``, a capture's id ...)

    def to_dict(self) -> dict:
        return {"gemm": dataclasses.asdict(self.key), "config": self.config.to_dict(), "verified": self.verified,
                "cost": self.cost, "source": self.source}


@dataclasses.dataclass(frozen=True)
class Lock:
    where: dict  # WHERE_FIELDS and the driver, as this machine's :func:`where_here` gives them
    entries: dict  # GemmKey -> LockEntry
    path: str = ""

    def entry_for(self, key: GemmKey, m: int) -> LockEntry | None:
        """The entry of ``key`` (any M) at M = ``m``: the one verified at this very M, else the one for any M."""
        return self.entries.get(key.at(m)) or self.entries.get(key)

    def config_for(self, key: GemmKey, m: int = 0) -> GemmConfig | None:
        entry = self.entry_for(key, m)
        return entry.config if entry else None

    def locked(self, shape, config: GemmConfig) -> GemmConfig | None:
        """The lock's configuration for ``shape`` (a GemmShape or ``MxNxK[:op]``) that would run in ``config``."""
        if isinstance(shape, str):
            shape = parse_shape(shape)
        return self.config_for(GemmKey.of(shape, config), shape.m)

    def check_here(self, here: dict | None = None) -> None:
        """Raise :class:`LockMismatch` unless this lock was written ``here`` (default: this machine, on its GPU)."""
        if here is None:
            require_gpu()
            here = where_here(fingerprint())
        differ = [f"{field.replace('_', ' ')} {self.where.get(field)} there, {here.get(field)} here"
                  for field in WHERE_FIELDS if self.where.get(field) != here.get(field)]
        if differ:
            raise LockMismatch(f"{self.path or 'the lock'} was written elsewhere ({'; '.join(differ)}): its "
                               "algorithms may not exist or keep their bits here; prescribe again on this machine "
                               "(cublas-det prescribe --lock FILE)")

    @property
    def workspace_bytes(self) -> int:
        """The workspace a stream gets, one size for all: the largest the entries name (32 MiB where none does)."""
        return max([entry.config.workspace_bytes or LT_WORKSPACE_BYTES for entry in self.entries.values()],
                   default=LT_WORKSPACE_BYTES)

    def to_dict(self) -> dict:
        return {"format": FORMAT, "version": VERSION, "where": self.where,
                "entries": [entry.to_dict() for entry in self.entries.values()]}

    def merged(self, entries) -> Lock:
        """This lock with ``entries`` added (an entry of the same key replaced)."""
        return dataclasses.replace(self, entries={**self.entries, **{e.key: e for e in entries}})


def where_here(fingerprint: dict) -> dict:
    """A lock's ``where`` from :func:`cublas_det.core.device.fingerprint`'s record of this machine."""
    gpu = fingerprint["gpu"]
    return {"gpu": gpu["name"], "sm_count": gpu["sm_count"], "compute_capability": gpu["compute_capability"],
            "cublas_version": fingerprint["cublas_version"], "driver_version": fingerprint["driver_version"]}


def write(lock: Lock, path: str) -> None:
    """Write ``lock`` to ``path`` whole or not at all; never one larger than :func:`load` reads."""
    try:
        write_json(path, lock.to_dict(), whole=True, max_bytes=MAX_FILE_BYTES)
    except TooLarge as size:
        raise UsageError(f"{path}: a lock of {plural(len(lock.entries), 'entry')} is {size}, more than the "
                         f"{MAX_FILE_BYTES:,} a lock may be; lock fewer GEMMs a file (split the capture)") from None
    except OSError as err:
        raise UsageError(f"{path}: cannot write the lock ({err.strerror or err}); give a writable path") from None


def load(path: str) -> Lock:
    """Read and check a lock file; anything else is one line (:class:`InputFileError`)."""
    return from_data(read_json(path, HINT, max_bytes=MAX_FILE_BYTES, what="lock file"), path)


_DIMENSION = ("an integer from 1 to 2**31 - 1", lambda value: is_int(value, 1, MAX_DIMENSION - 1))
_ELEMENT_TYPE = (f"one of {', '.join(GEMM_TYPES)}", lambda value: isinstance(value, str) and value in GEMM_TYPES)
_KEY = {  # GemmKey's fields, in order
    "input_dtype": _ELEMENT_TYPE, "output_dtype": _ELEMENT_TYPE,
    "compute_type": ("a cuBLAS compute type such as COMPUTE_32F",
                     lambda value: isinstance(value, str) and value in ComputeType.__members__),
    "trans_a": "true or false", "trans_b": "true or false", "n": _DIMENSION, "k": _DIMENSION,
    "epilogue": ('"" or "BIAS"', lambda value: value in ("", "BIAS")),
    "m": ("0 (any M) or an integer up to 2**31 - 1", lambda value: is_int(value, 0, MAX_DIMENSION - 1))}
_GEMM = Record(_KEY, required=tuple(_KEY)[:-1], null=False)  # m absent: any M


def _c_range(kind) -> tuple:
    """0 to the largest value of the C integer type ``kind`` (an algorithm's ids and indices are never negative)."""
    bits = 8 * ctypes.sizeof(kind) - (kind(-1).value < 0)
    return f"an integer from 0 to 2**{bits} - 1", lambda value: is_int(value, 0, (1 << bits) - 1)


_WORKSPACE = ("an integer from 0 to 2**40", lambda value: is_int(value, 0, 1 << 40))  # 1 TiB: more than a GPU has
_ALGO = Record({name: _c_range(kind) for name, (_, kind) in ALGO_CONFIG.items()}, required=("algo_id",), null=False)
_CONFIG = Record({"lt_algo": _ALGO, "workspace_bytes": _WORKSPACE, "lt_sm_count_target": _c_range(ctypes.c_int32)})
_ENTRY = Record({"gemm": _GEMM, "config": _CONFIG, "verified": "an object", "cost": "an object",
                 "source": "a string"}, required=("gemm", "config", "verified"))
_WHERE = Record({"gpu": "a non-empty string", "sm_count": _DIMENSION, "compute_capability": "a non-empty string",
                 "cublas_version": "a non-empty string"}, required=WHERE_FIELDS)
_LOCK = Record({"where": _WHERE, "entries": Each(_ENTRY)}, required=("where", "entries"))
_REPORT = Record({"locked": "an object of integers >= 0", "fell_through": "an object of objects", "lock": "a string"},
                 required=("locked", "fell_through"))
REPORT_HINT = "a process under `cublas-det run` writes it at exit"
LOCK_ENV, REPORT_ENV = "CUBLAS_DET_LOCK", "CUBLAS_DET_LOCK_REPORT"  # what run tells each process it enters
_REPORT_NAME = re.compile(r"[0-9]+\.json")


def from_data(data, path: str) -> Lock:
    """A lock file's parsed JSON, checked, as a :class:`Lock`."""
    check_format(data, path, FORMAT, VERSION, "lock file", HINT, "prescribe again")
    check(data, f"{path}:", _LOCK, hint=HINT)
    found = {}
    for index, entry in enumerate(data["entries"]):
        at = f"{path}: entries[{index}]"
        if entry["gemm"].get("batch", 1) != 1:  # written when an entry held for one batch count alone
            raise InputFileError(f"{at}: an entry for a batch of {entry['gemm']['batch']} alone, from an older "
                                 f"version; one entry now serves every batch count: prescribe again ({HINT})")
        key = GemmKey(**{name: entry["gemm"].get(name, 0) for name in _GEMM.fields})
        try:
            config = GemmConfig.from_dict(entry["config"])
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            raise InputFileError(f"{at}: the configuration is malformed ({type(err).__name__}: {err}); "
                                 f"{HINT}") from None
        if config.api != "lt" or not config.lt_algo:
            raise InputFileError(f"{at}: the configuration pins no cuBLASLt algorithm; {HINT}")
        if dataclasses.replace(key, input_dtype=config.input_dtype, output_dtype=config.output_dtype,
                               compute_type=config.lt_compute_type.name, epilogue=config.lt_epilogue) != key:
            raise InputFileError(f"{at}: the configuration's types or epilogue are not the GEMM's; {HINT}")
        if key in found:
            raise InputFileError(f"{at}: a second entry for {key}; {HINT}")
        found[key] = LockEntry(key, config, entry["verified"], entry.get("cost"), entry.get("source") or "")
    return Lock(dict(data["where"]), found, path)


def count_fall(falls: dict, key: GemmKey | None, m: int, reason: str, calls: int = 1, name: str = "a GEMM") -> None:
    """Count ``calls`` of a GEMM (``key``, or None where it has none: then ``name``) at M = ``m`` that fell through
    for ``reason`` into ``falls`` ((name, reason) -> item); the largest M's shape is the one the report's add
    command names."""
    item = falls.setdefault((str(key) if key else name, reason), {"calls": 0, "reason": reason, "m": 0})
    item["calls"] += calls
    if key is not None and m > item["m"]:
        item.update(m=m, spec=key.at(m).spec, dtype=key.input_dtype, mode="tf32" if key.tf32 else "default")


def named_falls(falls: dict) -> dict:
    """:func:`count_fall`'s items by GEMM, as a :class:`LockReport` holds them: one that fell for two reasons
    is said under each."""
    named: dict = {}
    for (name, reason), item in falls.items():
        named[f"{name} ({reason})" if name in named else name] = dict(item)
    return named


@dataclasses.dataclass(frozen=True)
class LockReport:
    """Calls locked and fallen through, per GEMM (``str(GemmKey)`` -> calls; largest M seen)."""

    locked: dict
    fell_through: dict  # GEMM -> {"calls": n, "reason": why, "m": largest M, "spec": MxNxK:op, "dtype": ...}
    lock_path: str = ""

    @property
    def locked_calls(self) -> int:
        return sum(self.locked.values())

    @property
    def fell_through_calls(self) -> int:
        return sum(item["calls"] for item in self.fell_through.values())

    def lines(self) -> list[str]:
        fell = {gemm: item for gemm, item in self.fell_through.items() if not item.get("compiled")}
        lines = [f"locked {plural(self.locked_calls, 'call')} of {plural(len(self.locked), 'GEMM')}; "
                 f"{plural(self.fell_through_calls, 'call')} of {plural(len(fell), 'GEMM')} fell through"]
        compiled = [f"  {gemm}: {item['reason']}" for gemm, item in self.fell_through.items() if item.get("compiled")]
        if not self.locked_calls and not self.fell_through_calls and not compiled:
            lines += ["  no GEMM reached the lock: none ran as a CUDA mm, addmm, bmm or baddbmm while it was on",
                      "  (a model compiled before it was, with max-autotune, may run kernels of its own)"]
        if compiled:
            lines += ["  not locked, compiled by torch.compile into kernels of its own (max-autotune):", *compiled,
                      '  keep them on cuBLAS: torch._inductor.config.max_autotune_gemm_backends = "ATEN"']
        shapes = []
        for gemm, item in sorted(fell.items(), key=lambda kv: -kv[1]["calls"]):
            lines.append(f"  {gemm}: {plural(item['calls'], 'call')}, {item['reason']}")
            if item["reason"] == "not in the lock" and item.get("spec") and "+bias" not in gemm:
                shapes.append((item["spec"], item["dtype"], item.get("mode", "default")))
        if shapes:
            lock = self.lock_path or "lock.json"
            for spec, dtype, mode in dict.fromkeys(shapes):
                label = getattr(GEMM_TYPES.get(dtype), "label", dtype)  # float32 -> fp32 ...
                lines += [f"  add: cublas-det prescribe --lock {lock} \\",
                          f"         --shape {spec} --dtype {label} --modes {mode}"]
            lines.append("  or all of them: cublas-det capture --out cap.json -- python train.py, then the")
            lines.append("  same prescribe command with --capture cap.json in place of --shape")
        return lines

    def __str__(self) -> str:
        return "\n".join(self.lines())

    def to_dict(self) -> dict:
        return {"locked": self.locked, "fell_through": self.fell_through, "lock": self.lock_path}

    @staticmethod
    def is_report(name: str) -> bool:
        """Whether a file in run's folder is a process's report (``PID.json``); anything else is not ours."""
        return bool(_REPORT_NAME.fullmatch(name))

    @classmethod
    def read(cls, folder: str) -> tuple[list[LockReport], list[str]]:
        """The reports :meth:`write` left in ``folder`` (``PID.json``), in PID order, and a line for each that
        could not be read; whatever else the folder holds is not ours."""
        found, unread = [], []
        for name in sorted(filter(cls.is_report, os.listdir(folder)), key=lambda n: int(n[:-5])):
            path = os.path.join(folder, name)
            try:
                data = check(read_json(path, REPORT_HINT, max_bytes=MAX_FILE_BYTES, what="lock report"), f"{path}:",
                             _REPORT, hint=REPORT_HINT)
            except InputFileError as err:
                unread.append(f"process {name[:-5]}: {err}")
                continue
            found.append(cls(data["locked"], data["fell_through"], data.get("lock") or ""))
        return found, unread

    def write(self, folder: str) -> None:
        """This process's report into ``folder``, whole or not at all."""
        write_json(os.path.join(folder, f"{os.getpid()}.json"), self.to_dict(), whole=True, compact=True)

    @classmethod
    def merge(cls, reports) -> LockReport:
        """One report of several processes'."""
        locked, fell, path = collections.Counter(), {}, ""
        for report in reports:
            locked.update(report.locked)
            path = path or report.lock_path
            for gemm, item in report.fell_through.items():
                mine = fell.setdefault(gemm, {**item, "calls": 0})
                mine["calls"] += item["calls"]
                if item.get("m", 0) > mine.get("m", 0):  # the largest M's shape is the one to add
                    mine.update({k: v for k, v in item.items() if k != "calls"})
        return cls(dict(locked), fell, path)
