"""The lock for any program, Python's side of ``interposer.c``: the library built with the system C compiler
(once per source, cached), its table written from the lock file in cuBLAS's own terms, and its per-process
reports read back as :class:`~cublas_det.lock.file.LockReport` items, each call named by the one path a
captured call takes to a :class:`~cublas_det.core.key.GemmKey` (:func:`~cublas_det.core.key.key_of`)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile

from ..bindings.cublas import ComputeType, MathMode
from ..bindings.cublaslt import ALGO_CONFIG, Epilogue
from ..core.key import GemmKey, key_of
from ..core.definition import GemmDefinition, InvalidGemm
from ..base.dtypes import BY_CUDA_NAME, GEMM_TYPES
from ..base.errors import UsageError
from .file import Lock, LockReport, count_fall, named_falls

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "interposer.c")
TABLE_ENV = "CUBLAS_DET_LOCK_TABLE"
REPORT_SUFFIX, ENTERED_SUFFIX = ".cublas.json", ".cublas-entered"  # beside PyTorch's PID.json, PID.entered
_TYPE_NAMES = {element.cuda: element.cuda_name for element in GEMM_TYPES.values()}  # 14 -> R_16BF ...
_MATH_MODES = tuple(int(mode) for mode in (MathMode.DEFAULT, MathMode.PEDANTIC, MathMode.TF32)) + (1,)  # 1: TENSOR_OP


class NoCompiler(UsageError):
    """No C compiler to build the interposer with."""


def compiler() -> str | None:
    """``$CC``, else ``cc``, ``gcc`` or ``clang`` on the PATH."""
    found = (shutil.which(name) for name in (os.environ.get("CC"), "cc", "gcc", "clang") if name)
    return next(filter(None, found), None)


def _cache_folder() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "cublas_det")


def build(folder: str | None = None) -> str:
    """The interposer's path, built on first use (by the source's digest, so an upgrade builds anew); raises
    :class:`NoCompiler` or :class:`UsageError` in one line."""
    with open(SOURCE, "rb") as source:
        digest = hashlib.sha256(source.read()).hexdigest()[:16]
    folder = folder or _cache_folder()
    target = os.path.join(folder, f"libcublas_det_lock-{digest}.so")
    if os.path.exists(target):
        return target
    cc = compiler()
    if cc is None:
        raise NoCompiler("no C compiler (cc, gcc or clang) to build the lock's interposer with, which a program "
                         "that is not PyTorch's needs; install one (apt-get install gcc) or set CC")
    try:
        os.makedirs(folder, exist_ok=True)
        made = tempfile.mkdtemp(dir=folder)
    except OSError as err:
        raise UsageError(f"{folder}: cannot build the lock's interposer there ({err.strerror or err}); set "
                         "XDG_CACHE_HOME to a writable folder") from None
    try:
        # -fno-stack-protector: dlsym must pass lookups on by a tail call (see interposer.c).
        built = subprocess.run([cc, "-O2", "-foptimize-sibling-calls", "-fPIC", "-shared", "-fno-stack-protector", "-o",
                                os.path.join(made, "lib.so"), SOURCE, "-ldl", "-lpthread"],
                               capture_output=True, text=True)
        if built.returncode:
            first = (built.stderr.strip().splitlines() or ["no message"])[0]
            raise UsageError(f"{cc} could not build the lock's interposer: {first[:200]}")
        os.replace(os.path.join(made, "lib.so"), target)
    finally:
        shutil.rmtree(made, ignore_errors=True)
    return target


_EPILOGUES = {int(e): f"EPILOGUE_{e.name}" for e in Epilogue}  # cublasLtEpilogue_t, as the cuBLASLt log names them
LT_CALL = 15  # the table's math-mode bit of a program's own cublasLtMatmul, which has no math mode


def _call(api: str, transa: int, transb: int, m: int, n: int, k: int, a_type: int, c_type: int, compute: int,
          math_mode: int | None, batch: int = 1, epilogue: int = Epilogue.DEFAULT,
          scale_type: int | None = None) -> GemmDefinition:
    """The definition a capture would make of this cuBLAS (or cuBLASLt) call, operands packed."""
    ops = ("N", "T", "C")
    lda = m if transa == 0 else k
    ldb = k if transb == 0 else n
    strides = (m * k, k * n, m * n) if batch > 1 else None
    lt = api == "cublasLtMatmul"
    return GemmDefinition(api, ops[transa], ops[transb], m, n, k, lda, ldb, m, _type(a_type), _type(a_type),
                          _type(c_type), _compute_name(compute), None if lt else -1, batch, strides,
                          None if lt else math_mode,
                          scale_type=_type(scale_type) if lt else None,
                          epilogue=_EPILOGUES.get(epilogue, str(epilogue)) if lt else None)


def _compute_name(compute: int) -> str:
    """``COMPUTE_32F`` ... of a cublasComputeType_t, or the number (a call the shim does not run)."""
    try:
        return ComputeType(compute).name
    except ValueError:
        return str(compute)


def _type(cuda: int | None) -> str | None:
    return None if cuda is None else _TYPE_NAMES.get(cuda, str(cuda))


def _rows(index: int, key: GemmKey) -> list[str]:
    """The table's rows of one lock entry: each (compute type argument, math modes) of a cuBLAS call, and
    of a program's own cublasLtMatmul, that makes ``key``, in cuBLAS's column-major terms."""
    lt_call = key.at(key.m or 1).packed()  # a key for any M laid out at M = 1; its rows say 0 (any) for cuBLAS's n
    m, n, k, transa, transb = lt_call.m, lt_call.n, lt_call.k, lt_call.transa == "T", lt_call.transb == "T"
    a_type, c_type, scale = (BY_CUDA_NAME[name].cuda for name in (lt_call.a_type, lt_call.c_type, lt_call.scale_type))
    lt_compute = ComputeType[lt_call.compute_type]
    epilogue = int(Epilogue.BIAS if lt_call.epilogue == "EPILOGUE_BIAS" else Epilogue.DEFAULT)
    rows = []
    for compute in ComputeType:
        modes = 0
        calls = [("cublasGemmEx", mode, mode) for mode in _MATH_MODES] + [("cublasLtMatmul", None, LT_CALL)]
        for api, mode, bit in calls:
            try:
                made = key_of(_call(api, int(transa), int(transb), m, n, k, a_type, c_type, int(compute), mode,
                                    epilogue=epilogue, scale_type=scale))
            except InvalidGemm:
                made = None
            if made is not None and made.at(0) == key.at(0):
                modes |= 1 << bit
        if modes:
            rows.append(f"row {index} {a_type} {c_type} {int(compute)} {modes} {epilogue} {int(transa)} "
                        f"{int(transb)} {m} {key.m and n} {k} {int(lt_compute)} {scale}")
    return rows


def write_table(lock: Lock, path: str) -> list[GemmKey]:
    """The interposer's table of ``lock`` at ``path``; the keys in the table's entry order (its report's
    ``entry`` indexes them)."""
    keys, lines = list(lock.entries), ["cublas_det.interposer 1", f"lock {os.path.abspath(lock.path)}",
                                       f"workspace {lock.workspace_bytes}"]
    for index, key in enumerate(keys):
        algo = dict(lock.entries[key].config.lt_algo)
        present = sum(1 << bit for bit, name in enumerate(ALGO_CONFIG) if name in algo)
        values = " ".join(str(algo.get(name, 0)) for name in ALGO_CONFIG)
        lines += [f"{row} {present} {values}" for row in _rows(index, key)]
    with open(path, "w") as table:
        table.write("\n".join(lines) + "\n")
    return keys


def read_reports(folder: str, keys: list[GemmKey], lock_path: str) -> tuple[list[LockReport], set, list[str]]:
    """The reports the interposer left in ``folder``: as LockReports, the PIDs that ran a GEMM through it
    (``PID.cublas-entered``), and a line for each report that could not be read."""
    reports, unread, entered = [], [], set()
    for name in sorted(os.listdir(folder)):
        if name.endswith(ENTERED_SUFFIX):
            entered.add(name[:-len(ENTERED_SUFFIX)])
        if not name.endswith(REPORT_SUFFIX):
            continue
        try:
            with open(os.path.join(folder, name)) as file:
                data = json.load(file)
            reports.append(_report(data["calls"], keys, lock_path))
        except (OSError, ValueError, KeyError, TypeError) as err:
            unread.append(f"process {name[:-len(REPORT_SUFFIX)]}: {type(err).__name__}: {err}")
    return reports, entered, unread


def _report(calls: list[dict], keys: list[GemmKey], lock_path: str) -> LockReport:
    locked, fell = {}, {}
    for call in calls:
        if call["entry"] >= 0:
            name = str(keys[call["entry"]])
            locked[name] = locked.get(name, 0) + call["calls"]
            continue
        try:
            lt = call["api"] == "cublasLtMatmul"
            api = call["api"].replace("_64", "").replace("_v2", "")  # as cuBLAS's log names it
            key = key_of(_call(api, call["transa"], call["transb"], call["m"], call["n"], call["k"],
                               call["a_type"], call["c_type"], call["compute"],
                               None if lt else call["math_mode"], call["batch"], call["epilogue"],
                               call["scale_type"] if lt else None))
        except InvalidGemm:
            key = None
        count_fall(fell, key and key.at(0), key.m if key else 0, call["reason"], call["calls"],
                   f"{call['api']} {call['m']}x{call['n']}x{call['k']}")
    return LockReport(locked, named_falls(fell), lock_path)
