"""Reading a run: which steps it has, which leaves (named tensors) each step has, and where their bytes are.

A *run* is what one training run dumped or recorded. Layouts understood (``RUN`` is a directory
unless said otherwise):

* trace log: ``RUN/trace.jsonl`` (or the ``.jsonl`` file itself) as written by
  :class:`cublas_det.trace.Recorder`: one JSON object per line with ``step``, ``leaf``, ``dtype``,
  ``shape``, ``digest`` (and ``algorithm``, and ``file`` when the tensor's bytes were written too).
  Only the log is read; leaves are in recording order.
* raw binaries: ``RUN/step_<N>/<leaf>.bin`` (leaf names may contain ``/``: subdirectories) or
  ``RUN/step<N>_<leaf>.bin`` (``step_<N>_<leaf>.bin`` too); the dtype is given (``--dtype``), the
  shape is 1-D.
* numpy: the same names with ``.npy``; ``RUN/step_<N>.npz`` or ``RUN/step<N>.npz`` (one leaf per
  array), or a single ``.npz`` file as a run of one step, step 0.
* safetensors: ``RUN/step_<N>.safetensors`` or ``RUN/step<N>.safetensors``, or a single file. The
  format (an 8-byte header length, a JSON header, the data) is read directly, so the
  ``safetensors`` package is not needed.

Without a log, leaves are in name order. Nothing is loaded here beyond headers: every leaf has a
:class:`DataSource` that streams its bytes (C order) when the comparison asks for them.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import struct
import zipfile
import zlib
from collections.abc import Mapping

import numpy as np

from .bits.digest import ALGORITHM, DIGEST_HEX_DIGITS
from .bits.streams import dtype_name_of, lookup_dtype
from .errors import InputFileError

LOG_NAME = "trace.jsonl"
STEP_DIR = re.compile(r"^step_?(\d+)$")
FLAT_FILE = re.compile(r"^step_?(\d+)_(.+)\.(bin|npy)$")
STEP_CONTAINER = re.compile(r"^step_?(\d+)\.(npz|safetensors)$")
LEAF_EXTENSIONS = (".bin", ".npy")
SAFETENSORS_DTYPES = {"F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16",
                      "I64": "int64", "I32": "int32", "I16": "int16", "I8": "int8",
                      "U64": "uint64", "U32": "uint32", "U16": "uint16", "U8": "uint8", "BOOL": "bool"}
_HEX = re.compile(r"^[0-9a-f]+$")


class RunLayoutError(InputFileError):
    """A run that cannot be read: a missing path, a malformed file, an unsupported dtype (one line)."""


@dataclasses.dataclass(frozen=True)
class DataSource:
    """Where a leaf's bytes are: ``nbytes`` from ``offset`` in ``path`` (in zip ``member`` if set).

    ``fortran_order``: the bytes in the file are in Fortran order (a ``.npy``/``.npz`` of an
    F-contiguous array); :meth:`open` then yields them in C order, read through numpy.
    """

    path: str
    offset: int
    nbytes: int
    member: str | None = None
    fortran_order: bool = False
    shape: tuple[int, ...] = ()
    dtype: str = "uint8"

    def open(self, chunk_bytes: int = 1 << 24):
        """A reader with ``readinto(buffer) -> int`` and ``close()``, positioned at the first byte."""
        try:
            if self.fortran_order:
                return _CorderReader(self, chunk_bytes)
            if self.member is not None:
                return _ZipMemberReader(self.path, self.member)
            stream = open(self.path, "rb", buffering=0)
            stream.seek(self.offset)
            return stream
        except (zipfile.BadZipFile, KeyError) as err:
            raise RunLayoutError(f"{self.describe()}: cannot read: {err}") from None

    def describe(self) -> str:
        return f"{self.path}[{self.member}]" if self.member else self.path


@dataclasses.dataclass(frozen=True)
class Leaf:
    """One named tensor of one step: its dtype and shape, and its bytes, its digest, or both."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    source: DataSource | None = None
    digest: str | None = None

    @property
    def elements(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.elements * lookup_dtype(self.dtype).itemsize


@dataclasses.dataclass(frozen=True)
class Run:
    """A run: its steps in ascending order, each a tuple of leaves in recording (or name) order."""

    path: str
    layout: str
    steps: Mapping[int, tuple[Leaf, ...]]
    recorded_order: bool = False  # leaf order comes from a log

    def describe(self) -> str:
        leaves = sorted({len(leaves) for leaves in self.steps.values()})
        per_step = f"{leaves[0]}" if len(leaves) == 1 else f"{leaves[0]}-{leaves[-1]}"
        return f"{self.path} ({self.layout}; {len(self.steps)} steps, {per_step} leaves per step)"


def open_run(path: str, *, raw_dtype: str = "float32") -> Run:
    """Discover the run at ``path``; ``raw_dtype`` is the dtype of ``.bin`` files without a log.

    Raises:
        RunLayoutError: no such path, no steps found, a malformed file or log line, a raw file
            whose size is not a whole number of elements, a duplicate leaf, an unsupported dtype.
    """
    raw = lookup_dtype(raw_dtype)
    if not os.path.exists(path):
        raise RunLayoutError(f"{path}: no such file or directory")
    if os.path.isfile(path):
        if path.endswith(".jsonl"):
            return _read_log(path)
        if path.endswith(".npz"):
            return Run(path, "numpy .npz", {0: _npz_leaves(path, raw.name)})
        if path.endswith(".safetensors"):
            return Run(path, "safetensors", {0: _safetensors_leaves(path)})
        raise RunLayoutError(f"{path}: not a run: give a directory, a trace .jsonl, a .npz or a .safetensors file")
    log = os.path.join(path, LOG_NAME)
    if os.path.isfile(log):
        return _read_log(log, run_path=path)
    return _read_directory(path, raw.name)


# -- directories of dumps -------------------------------------------------------------------
def _read_directory(path: str, raw_dtype: str) -> Run:
    found: dict[int, dict[str, Leaf]] = {}
    kinds: set[str] = set()

    def add(step: int, leaf: Leaf, where: str) -> None:
        leaves = found.setdefault(step, {})
        if leaf.name in leaves:
            raise RunLayoutError(f"{where}: leaf {leaf.name!r} of step {step} is also in "
                                 f"{leaves[leaf.name].source.describe()}; keep one of them")
        leaves[leaf.name] = leaf

    try:
        entries = sorted(os.scandir(path), key=lambda entry: entry.name)
    except OSError as err:
        raise RunLayoutError(f"{path}: cannot list: {err.strerror or err}") from None
    for entry in entries:
        step_dir = STEP_DIR.match(entry.name)
        flat = FLAT_FILE.match(entry.name)
        container = STEP_CONTAINER.match(entry.name)
        if step_dir and entry.is_dir():
            step = int(step_dir.group(1))
            found.setdefault(step, {})
            for file_path, name in _leaf_files(entry.path):
                leaf = _file_leaf(file_path, name, raw_dtype)
                kinds.add(os.path.splitext(file_path)[1])
                add(step, leaf, file_path)
        elif flat and entry.is_file():
            leaf = _file_leaf(entry.path, flat.group(2), raw_dtype)
            kinds.add("." + flat.group(3))
            add(int(flat.group(1)), leaf, entry.path)
        elif container and entry.is_file():
            step, kind = int(container.group(1)), container.group(2)
            kinds.add("." + kind)
            found.setdefault(step, {})
            for leaf in (_npz_leaves(entry.path, raw_dtype) if kind == "npz" else _safetensors_leaves(entry.path)):
                add(step, leaf, entry.path)
    if not found:
        raise RunLayoutError(f"{path}: no steps found: expected {LOG_NAME}, step_<N>/<leaf>.bin, "
                             "step<N>_<leaf>.bin, .npy, step_<N>.npz or step_<N>.safetensors")
    names = {".bin": f"raw {raw_dtype} binaries", ".npy": "numpy .npy", ".npz": "numpy .npz",
             ".safetensors": "safetensors"}
    layout = " + ".join(names[kind] for kind in sorted(kinds)) or "empty step directories"
    steps = {step: tuple(sorted(found[step].values(), key=lambda leaf: leaf.name)) for step in sorted(found)}
    return Run(path, layout, steps)


def _leaf_files(step_dir: str):
    """(path, leaf name) of the .bin/.npy files under a step directory, subdirectories included."""
    for root, dirs, files in os.walk(step_dir):
        dirs.sort()
        for file_name in sorted(files):
            stem, extension = os.path.splitext(file_name)
            if extension in LEAF_EXTENSIONS:
                relative = os.path.relpath(os.path.join(root, stem), step_dir)
                yield os.path.join(root, file_name), relative.replace(os.sep, "/")


def _file_leaf(path: str, name: str, raw_dtype: str) -> Leaf:
    if path.endswith(".npy"):
        with _opened(path) as stream:
            dtype, shape, fortran = _npy_header(stream, path, raw_dtype)
            offset = stream.tell()
        leaf = _leaf_with_source(name, dtype, shape, path, offset, fortran)
        _check_size(path, offset + leaf.nbytes, exact=False)
        return leaf
    itemsize = lookup_dtype(raw_dtype).itemsize
    size = _file_size(path)
    if size % itemsize:
        raise RunLayoutError(f"{path}: {size} bytes is not a whole number of {raw_dtype} elements "
                             f"({itemsize} bytes each); is --dtype right?")
    return _leaf_with_source(name, raw_dtype, (size // itemsize,), path, 0, False)


def _leaf_with_source(name, dtype, shape, path, offset, fortran, member=None) -> Leaf:
    nbytes = math.prod(shape) * lookup_dtype(dtype).itemsize
    source = DataSource(path, offset, nbytes, member, fortran and len(shape) > 1, tuple(shape), dtype)
    return Leaf(name, dtype, tuple(shape), source)


def _npy_header(stream, where: str, raw_dtype: str):
    """(dtype name, shape, fortran_order) from a .npy header; the stream is left at the data."""
    try:
        version = np.lib.format.read_magic(stream)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(stream)
        else:
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(stream)
    except (ValueError, OSError, SyntaxError, EOFError) as err:
        raise RunLayoutError(f"{where}: not a readable .npy file ({err})") from None
    if dtype.kind == "V" and dtype.itemsize == 2 and dtype.names is None:
        # numpy writes ml_dtypes' bfloat16 as untyped 2-byte elements ('<V2')
        if raw_dtype != "bfloat16":
            raise RunLayoutError(f"{where}: untyped 2-byte elements (how numpy saves bfloat16); "
                                 "pass --dtype bfloat16 if they are")
        return "bfloat16", tuple(shape), fortran
    try:
        return dtype_name_of(dtype), tuple(shape), fortran
    except ValueError as err:
        raise RunLayoutError(f"{where}: {err}") from None


def _npz_leaves(path: str, raw_dtype: str) -> tuple[Leaf, ...]:
    leaves = []
    try:
        with zipfile.ZipFile(path) as archive:
            for member in sorted(archive.namelist()):
                if not member.endswith(".npy"):
                    continue
                where = f"{path}[{member}]"
                with archive.open(member) as stream:
                    dtype, shape, fortran = _npy_header(stream, where, raw_dtype)
                    header = stream.tell()
                if archive.getinfo(member).file_size < header + math.prod(shape) * lookup_dtype(dtype).itemsize:
                    raise RunLayoutError(f"{where}: truncated: shorter than its header says")
                leaves.append(_leaf_with_source(member[:-4], dtype, shape, path, header, fortran, member))
    except (zipfile.BadZipFile, zlib.error, OSError) as err:
        raise RunLayoutError(f"{path}: not a readable .npz file ({err})") from None
    return tuple(leaves)


def _safetensors_leaves(path: str) -> tuple[Leaf, ...]:
    size = _file_size(path)
    with _opened(path) as stream:
        prefix = stream.read(8)
        if len(prefix) < 8:
            raise RunLayoutError(f"{path}: not a safetensors file (shorter than 8 bytes)")
        (header_size,) = struct.unpack("<Q", prefix)
        if header_size > size - 8:
            raise RunLayoutError(f"{path}: not a safetensors file (header of {header_size} bytes in a "
                                 f"{size}-byte file)")
        try:
            header = json.loads(stream.read(header_size))
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise RunLayoutError(f"{path}: not a safetensors file (bad JSON header: {err})") from None
    if not isinstance(header, dict):
        raise RunLayoutError(f"{path}: not a safetensors file (the header is not a JSON object)")
    base = 8 + header_size
    leaves = []
    for name in sorted(key for key in header if key != "__metadata__"):
        entry = header[name]
        try:
            dtype = SAFETENSORS_DTYPES[entry["dtype"]]
            shape = tuple(int(n) for n in entry["shape"])
            begin, end = (int(n) for n in entry["data_offsets"])
        except KeyError as err:
            if isinstance(entry, dict) and "dtype" in entry and entry["dtype"] not in SAFETENSORS_DTYPES:
                raise RunLayoutError(f"{path}: tensor {name!r} has dtype {entry['dtype']}, not supported; "
                                     f"supported: {', '.join(SAFETENSORS_DTYPES)}") from None
            raise RunLayoutError(f"{path}: tensor {name!r}: header entry lacks {err}") from None
        except (TypeError, ValueError) as err:
            raise RunLayoutError(f"{path}: tensor {name!r}: malformed header entry ({err})") from None
        leaf = _leaf_with_source(name, dtype, shape, path, base + begin, False)
        if end - begin != leaf.nbytes or base + end > size:
            raise RunLayoutError(f"{path}: tensor {name!r}: data_offsets [{begin}, {end}] do not hold "
                                 f"{dtype}{list(shape)} within the file")
        leaves.append(leaf)
    return tuple(leaves)


# -- trace logs ----------------------------------------------------------------------------
def _read_log(log_path: str, run_path: str | None = None) -> Run:
    base = os.path.dirname(os.path.abspath(log_path))
    found: dict[int, dict[str, Leaf]] = {}
    files = 0
    with _opened(log_path, text=True) as stream:
        for number, line in enumerate(stream, 1):
            if not line.strip():
                continue
            where = f"{log_path}:{number}"
            step, leaf = _log_entry(line, where, base)
            leaves = found.setdefault(step, {})
            if leaf.name in leaves:
                raise RunLayoutError(f"{where}: leaf {leaf.name!r} of step {step} was recorded twice")
            leaves[leaf.name] = leaf
            files += leaf.source is not None
    if not found:
        raise RunLayoutError(f"{log_path}: empty trace log: no steps recorded")
    layout = "trace log, digests" + (" and tensor files" if files else "")
    steps = {step: tuple(found[step].values()) for step in sorted(found)}
    return Run(run_path or log_path, layout, steps, recorded_order=True)


def _log_entry(line: str, where: str, base: str) -> tuple[int, Leaf]:
    try:
        entry = json.loads(line)
    except json.JSONDecodeError as err:
        raise RunLayoutError(f"{where}: malformed JSON line ({err.msg})") from None
    if not isinstance(entry, dict):
        raise RunLayoutError(f"{where}: expected a JSON object with step, leaf, dtype, shape, digest")
    missing = [key for key in ("step", "leaf", "dtype", "shape") if key not in entry]
    if missing or ("digest" not in entry and "file" not in entry):
        missing += [] if missing or "digest" in entry else ["digest"]
        raise RunLayoutError(f"{where}: missing {', '.join(missing)}")
    step, name, shape = entry["step"], entry["leaf"], entry["shape"]
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise RunLayoutError(f"{where}: step must be an integer >= 0, not {step!r}")
    if not isinstance(name, str) or not name:
        raise RunLayoutError(f"{where}: leaf must be a non-empty string, not {name!r}")
    if not isinstance(shape, list) or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0
                                              for n in shape):
        raise RunLayoutError(f"{where}: shape must be a list of integers >= 0, not {shape!r}")
    try:
        dtype = lookup_dtype(entry["dtype"]).name
    except ValueError as err:
        raise RunLayoutError(f"{where}: {err}") from None
    algorithm = entry.get("algorithm", ALGORITHM)
    if algorithm != ALGORITHM:
        raise RunLayoutError(f"{where}: digest algorithm {algorithm!r} is not known here (this version "
                             f"reads {ALGORITHM})")
    digest = entry.get("digest")
    if digest is not None and (not isinstance(digest, str) or len(digest) != DIGEST_HEX_DIGITS
                               or not _HEX.match(digest)):
        raise RunLayoutError(f"{where}: digest must be {DIGEST_HEX_DIGITS} lowercase hex digits, not {digest!r}")
    leaf = Leaf(name, dtype, tuple(shape), None, digest)
    if entry.get("file") is not None:
        file_path = os.path.join(base, str(entry["file"]))
        leaf = dataclasses.replace(_leaf_with_source(name, dtype, shape, file_path, 0, False), digest=digest)
        _check_size(file_path, leaf.nbytes, exact=True)
    return step, leaf


# -- small helpers -------------------------------------------------------------------------
def _opened(path: str, text: bool = False):
    try:
        return open(path, encoding="utf-8") if text else open(path, "rb")
    except OSError as err:
        raise RunLayoutError(f"{path}: cannot open: {err.strerror or err}") from None


def _file_size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError as err:
        raise RunLayoutError(f"{path}: cannot stat: {err.strerror or err}") from None


def _check_size(path: str, expected: int, *, exact: bool) -> None:
    size = _file_size(path)
    if size < expected or (exact and size != expected):
        raise RunLayoutError(f"{path}: {size} bytes, but its dtype and shape need {expected}")


def read_order_file(path: str) -> list[str]:
    """Leaf names, one per line; blank lines and lines starting with ``#`` are skipped."""
    with _opened(path, text=True) as stream:
        try:
            return [line.strip() for line in stream if line.strip() and not line.lstrip().startswith("#")]
        except UnicodeDecodeError as err:
            raise RunLayoutError(f"{path}: not a text file of leaf names ({err.reason})") from None


class _ZipMemberReader:
    """A zip member's bytes after its .npy header (decompressed while read)."""

    def __init__(self, path: str, member: str):
        self._archive = zipfile.ZipFile(path)
        try:
            self._stream = self._archive.open(member)
            _npy_header(self._stream, f"{path}[{member}]", "bfloat16")
        except BaseException:
            self._archive.close()
            raise

    def readinto(self, buffer) -> int:
        return self._stream.readinto(buffer)

    def close(self) -> None:
        self._stream.close()
        self._archive.close()


class _CorderReader:
    """The C-order bytes of a Fortran-order .npy/.npz array, a block of leading-axis slices at a time.

    A .npy is memory-mapped; a .npz member is loaded whole (one leaf in memory, never a run).
    """

    def __init__(self, source: DataSource, chunk_bytes: int):
        if source.member is None:
            self._array = np.load(source.path, mmap_mode="r", allow_pickle=False)
        else:
            with np.load(source.path, allow_pickle=False) as archive:
                self._array = archive[source.member[:-4]]
        self._array = self._array.view(lookup_dtype(source.dtype).bits_dtype)
        row_bytes = max(1, source.nbytes // max(1, source.shape[0]))
        self._rows_per_block = max(1, chunk_bytes // row_bytes)
        self._row = 0
        self._pending = memoryview(b"")

    def readinto(self, buffer) -> int:
        view = memoryview(buffer).cast("B")
        filled = 0
        while filled < len(view):
            if not self._pending:
                if self._row >= self._array.shape[0]:
                    break
                block = self._array[self._row:self._row + self._rows_per_block]
                self._row += block.shape[0]
                self._pending = memoryview(np.ascontiguousarray(block).reshape(-1).view(np.uint8))
            take = min(len(self._pending), len(view) - filled)
            view[filled:filled + take] = self._pending[:take]
            self._pending = self._pending[take:]
            filled += take
        return filled

    def close(self) -> None:
        self._array = None


def read_into(reader, buffer, nbytes: int) -> int:
    """Fill ``buffer[:nbytes]`` from ``reader`` (short reads retried); the bytes read (less only at the end)."""
    view = memoryview(buffer)[:nbytes]
    filled = 0
    while filled < nbytes:
        count = reader.readinto(view[filled:])
        if not count:
            break
        filled += count
    return filled

