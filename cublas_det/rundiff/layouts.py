"""A run's steps, each step's leaves (named tensors), and where their bytes are, in the layouts of
:data:`LAYOUTS`: only headers are read; a leaf's :class:`DataSource` streams its bytes on demand."""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
import re
import stat
import struct
import zipfile
import zlib
from collections.abc import Mapping

import numpy as np

from ..bits.streams import dtype_name_of, lookup_dtype
from ..base.dtypes import ELEMENT_TYPES
from ..base.errors import InputFileError
from ..base.files import decode_text, file_kind, open_regular, parse_json, regular_file_size
from ..base import schema
from ..store.trace_log import LOG_NAME, is_shape, read as read_trace_log
from ..base.words import listing, plural

STEP_DIR = re.compile(r"^step_?(\d+)$")
STEP_FILE = re.compile(r"^step_?(\d+)(?:_(.+)\.(bin|npy)|\.(npz|safetensors))$")  # never a .pt, which needs PyTorch
LEAF_EXTENSIONS = (".bin", ".npy")
CHECKPOINT_EXTENSIONS = (".npz", ".safetensors", ".pt")
_KIND_NAMES = {".npy": "numpy .npy", ".npz": "numpy .npz", ".safetensors": "safetensors", ".pt": "PyTorch .pt"}
LAYOUTS = (f"{LOG_NAME}; step_<N>/<leaf>.bin or .npy; step_<N>/<file>.safetensors, .npz or .pt (leaves "
           "<file>:<key>); step_<N>.npz or .safetensors; step<N>_<leaf>.bin or .npy")
SAFETENSORS_DTYPES = {t.safetensors: name for name, t in ELEMENT_TYPES.items() if t.safetensors}  # F32 -> float32
MAX_SAFETENSORS_HEADER = 100_000_000  # the safetensors package's own limit
MAX_ORDER_FILE = 64 << 20


class RunLayoutError(InputFileError):
    """A run that cannot be read: a missing path, a malformed file, an unsupported dtype (one line)."""


@dataclasses.dataclass(frozen=True)
class DataSource:
    """Where a leaf's bytes are: ``nbytes`` from ``offset`` in ``path`` (zip ``member``, or PyTorch
    ``torch_key``); ``fortran_order``: :meth:`open` yields them in C order through numpy."""

    path: str
    offset: int
    nbytes: int
    member: str | None = None
    fortran_order: bool = False
    shape: tuple[int, ...] = ()
    dtype: str = "uint8"
    torch_key: str | None = None

    def open(self, chunk_bytes: int = 1 << 24):
        """A reader with ``readinto(buffer) -> int`` and ``close()``, positioned at the first byte."""
        try:
            if self.torch_key is not None:
                import torch
                tensor = dict(_flattened(_torch_state(self.path, _stamp(self.path)), ""))[self.torch_key]
                tensor = tensor.detach().contiguous()
                if tensor.dtype == torch.bfloat16:  # NumPy has no bfloat16: the same bits as int16
                    tensor = tensor.view(torch.int16)
                return _BlockReader([_bytes_of(tensor.numpy())])
            if self.fortran_order:  # C order through numpy, a block of leading-axis slices at a time
                if self.member is None:
                    array = np.load(self.path, mmap_mode="r", allow_pickle=False)
                else:  # a .npz member loaded whole
                    with np.load(self.path, allow_pickle=False) as archive:
                        array = archive[self.member[:-4]]
                array = array.view(lookup_dtype(self.dtype).bits_dtype)
                rows = max(1, chunk_bytes // max(1, self.nbytes // max(1, self.shape[0])))
                return _BlockReader(_bytes_of(array[row:row + rows]) for row in range(0, array.shape[0], rows))
            if self.member is not None:
                blocks = _zip_member_blocks(self.path, self.member, chunk_bytes)
                next(blocks)  # opened, past the header
                return _BlockReader(blocks)
            stream = open_regular(self.path, "give a readable regular file", error=RunLayoutError, buffering=0)
            stream.seek(self.offset)
            return stream
        except RunLayoutError:
            raise
        except (zipfile.BadZipFile, KeyError, OSError, ValueError) as err:
            raise RunLayoutError(f"{self.describe()}: cannot read: {getattr(err, 'strerror', None) or err}") from None

    def describe(self) -> str:
        key = self.member or self.torch_key
        return f"{self.path}[{key}]" if key else self.path


@dataclasses.dataclass(frozen=True)
class Leaf:
    """One named tensor of one step: its dtype and shape, and its bytes, its digest, or both."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    source: DataSource | None = None
    digest: str | None = None


@dataclasses.dataclass(frozen=True)
class TrainingRun:
    """Steps in ascending order, each a tuple of leaves in recording (or name) order; ``skipped``: files no
    layout reads (and why); ``notes``: what was left out while reading; ``stopped``: the log's last line is cut;
    ``unreadable``: step -> why a file of it could not be read (the steps before it are compared)."""

    path: str
    layout: str
    steps: Mapping[int, tuple[Leaf, ...]]
    skipped: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    stopped: bool = False
    unreadable: Mapping[int, str] = dataclasses.field(default_factory=dict)

    def describe(self) -> str:
        leaves = sorted({len(leaves) for step, leaves in self.steps.items() if step not in self.unreadable} or {0})
        per_step = f"{leaves[0]}" if len(leaves) == 1 else f"{leaves[0]}-{leaves[-1]}"
        noun = "leaf" if leaves == [1] else "leaves"
        return f"{self.path} ({self.layout}; {plural(len(self.steps), 'step')}, {per_step} {noun} per step)"


def open_run(path: str, *, raw_dtype: str = "float32") -> TrainingRun:
    """The run at ``path``; ``raw_dtype``: of ``.bin`` files without a log. RunLayoutError if it cannot be read."""
    raw = lookup_dtype(raw_dtype)
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise RunLayoutError(f"{path}: no such file or directory") from None
    except OSError as err:
        raise RunLayoutError(f"{path}: cannot stat: {err.strerror or err}") from None
    what = "give a directory, a trace .jsonl, a .npz, .safetensors or .pt file"
    if stat.S_ISREG(mode):
        if path.endswith(".jsonl"):
            return _read_log(path)
        extension = next((kind for kind in CHECKPOINT_EXTENSIONS if path.endswith(kind)), None)
        if extension:
            leaves, skipped = _file_leaves(path, extension, raw.name, "")
            if leaves is None:
                raise RunLayoutError(f"{path}: a .pt file is read through PyTorch, which is not installed: "
                                     "pip install torch")
            return TrainingRun(path, _KIND_NAMES[extension], {0: leaves}, skipped=tuple(skipped))
        raise RunLayoutError(f"{path}: not a run: {what}")
    if not stat.S_ISDIR(mode):
        raise RunLayoutError(f"{path}: is {file_kind(mode)}, not a run: {what}")
    log = os.path.join(path, LOG_NAME)
    if os.path.lexists(log):
        return _read_log(log, run_path=path)
    return _read_directory(path, raw.name)


def _read_directory(path: str, raw_dtype: str) -> TrainingRun:
    found: dict[int, dict[str, Leaf]] = {}
    kinds: set[str] = set()
    skipped: list[str] = []
    unreadable: dict[int, str] = {}
    def add(step: int, extension: str, file_path: str, name: str, where: str) -> None:
        regular_file_size(file_path, error=RunLayoutError)  # what is not a file refuses the run
        step_leaves = found.setdefault(step, {})
        try:
            leaves, left_out = _file_leaves(file_path, extension, raw_dtype, name)
        except RunLayoutError as err:  # a file that cannot be read: an error at its step, as in comparing it
            unreadable.setdefault(step, str(err))
            return
        skipped.extend(where + reason for reason in left_out)
        if leaves is None:
            return
        kinds.add(extension)
        for leaf in leaves:
            if leaf.name in step_leaves:
                raise RunLayoutError(f"{file_path}: leaf {leaf.name!r} of step {step} is also in "
                                     f"{step_leaves[leaf.name].source.describe()}; keep one of them")
            step_leaves[leaf.name] = leaf
    try:
        entries = sorted(os.scandir(path), key=lambda entry: entry.name)
    except OSError as err:
        raise RunLayoutError(f"{path}: cannot list: {err.strerror or err}") from None
    for entry in entries:
        step_dir, step_file = STEP_DIR.match(entry.name), STEP_FILE.match(entry.name)
        if step_dir and entry.is_dir():
            step = int(step_dir.group(1))
            found.setdefault(step, {})
            for file_path, relative in _step_files(entry.path):
                extension = os.path.splitext(file_path)[1]
                if extension in LEAF_EXTENSIONS + CHECKPOINT_EXTENSIONS:
                    name = relative[:-len(extension)] if extension in LEAF_EXTENSIONS else f"{relative}:"
                    add(step, extension, file_path, name, f"{entry.name}/{relative}")
                else:
                    skipped.append(f"{entry.name}/{relative}")
        elif step_file and not entry.is_file():
            regular_file_size(entry.path, error=RunLayoutError)  # says what it is instead
            raise RunLayoutError(f"{entry.path}: not a regular file")
        elif step_file:
            step, name, leaf_kind, container_kind = step_file.groups()
            add(int(step), "." + (leaf_kind or container_kind), entry.path, name or "", "")
        else:
            skipped.append(entry.name + ("/" if entry.is_dir() else ""))
    if not found:
        listed = f"; found only {listing(skipped)}" if skipped else " (it is empty)"
        raise RunLayoutError(f"{path}: no steps found{listed}; diff reads {LAYOUTS}")
    names = {".bin": f"raw {raw_dtype} binaries", **_KIND_NAMES}
    layout = " + ".join(names[kind] for kind in sorted(kinds)) or "empty step directories"
    steps = {step: tuple(sorted(found[step].values(), key=lambda leaf: leaf.name)) for step in sorted(found)}
    return TrainingRun(path, layout, steps, skipped=tuple(skipped), unreadable=unreadable)


def _step_files(step_dir: str):
    """(path, path relative to the step directory with ``/``) of every file under it, in name order."""
    for root, dirs, files in os.walk(step_dir):
        dirs.sort()
        for file_name in sorted(files):
            file_path = os.path.join(root, file_name)
            yield file_path, os.path.relpath(file_path, step_dir).replace(os.sep, "/")


def _file_leaves(path: str, extension: str, raw_dtype: str, name: str):
    """(leaves, what was left out): a .bin or .npy file is leaf ``name``, a checkpoint's leaves ``<name><key>``."""
    if extension == ".npz":
        return _npz_leaves(path, raw_dtype, name), ()
    if extension == ".safetensors":
        return _safetensors_leaves(path, name), ()
    if extension == ".pt":
        return _torch_leaves(path, name)
    if extension == ".npy":
        with open_regular(path, error=RunLayoutError) as stream:
            dtype, shape, fortran = _npy_header(stream, path, raw_dtype)
            offset = stream.tell()
        leaf = _leaf(name, dtype, shape, path, offset, fortran)
        _check_size(path, offset + leaf.source.nbytes)
        return (leaf,), ()
    itemsize = lookup_dtype(raw_dtype).itemsize
    size = regular_file_size(path, error=RunLayoutError)
    if size % itemsize:
        raise RunLayoutError(f"{path}: {size} bytes is not a whole number of {raw_dtype} elements "
                             f"({itemsize} bytes each); is --dtype right?")
    return (_leaf(name, raw_dtype, (size // itemsize,), path),), ()


def _leaf(name: str, dtype: str, shape, path: str, offset: int = 0, fortran: bool = False, **key) -> Leaf:
    """A leaf whose bytes are in ``path`` from ``offset`` (``key``: a zip ``member`` or a ``torch_key``)."""
    shape = tuple(shape)
    nbytes = math.prod(shape) * lookup_dtype(dtype).itemsize
    return Leaf(name, dtype, shape, DataSource(path, offset, nbytes, fortran_order=fortran and len(shape) > 1,
                                               shape=shape, dtype=dtype, **key))


def _npy_header(stream, where: str, raw_dtype: str):
    """(dtype name, shape, fortran_order) from a .npy header; the stream is left at the data."""
    try:
        version = np.lib.format.read_magic(stream)
        read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else \
            np.lib.format.read_array_header_2_0
        shape, fortran, dtype = read_header(stream)
    except (ValueError, OSError, SyntaxError, EOFError, TypeError) as err:
        raise RunLayoutError(f"{where}: not a readable .npy file ({err})") from None
    if not is_shape(shape):
        raise RunLayoutError(f"{where}: not a readable .npy file (shape {schema.found(shape)}: expected integers >= 0)")
    if dtype.kind == "V" and dtype.itemsize == 2 and dtype.names is None:  # how numpy writes ml_dtypes' bfloat16
        if raw_dtype != "bfloat16":
            raise RunLayoutError(f"{where}: untyped 2-byte elements (how numpy saves bfloat16); "
                                 "pass --dtype bfloat16 if they are")
        return "bfloat16", tuple(shape), fortran
    try:
        return dtype_name_of(dtype), tuple(shape), fortran
    except ValueError as err:
        raise RunLayoutError(f"{where}: {err}") from None


def _npz_leaves(path: str, raw_dtype: str, prefix: str) -> tuple[Leaf, ...]:
    leaves = []
    try:
        with open_regular(path, error=RunLayoutError) as file, zipfile.ZipFile(file) as archive:
            for member in sorted(name for name in archive.namelist() if name.endswith(".npy")):
                where = f"{path}[{member}]"
                with archive.open(member) as stream:
                    dtype, shape, fortran = _npy_header(stream, where, raw_dtype)
                    header = stream.tell()
                leaves.append(_leaf(prefix + member[:-4], dtype, shape, path, header, fortran, member=member))
                expected, size = header + leaves[-1].source.nbytes, archive.getinfo(member).file_size
                if size != expected:
                    raise RunLayoutError(f"{where}: {size} bytes, but its header, dtype and shape say {expected}: "
                                         f"{'truncated' if size < expected else 'longer than its header says'}")
    except (zipfile.BadZipFile, zlib.error, OSError, EOFError, NotImplementedError) as err:
        raise RunLayoutError(f"{path}: not a readable .npz file ({err})") from None
    return tuple(leaves)


def _safetensors_leaves(path: str, prefix: str) -> tuple[Leaf, ...]:
    with open_regular(path, error=RunLayoutError) as stream:
        size = os.fstat(stream.fileno()).st_size
        head = stream.read(8)
        if len(head) < 8:
            raise RunLayoutError(f"{path}: not a safetensors file (shorter than 8 bytes)")
        (header_size,) = struct.unpack("<Q", head)
        if header_size > min(size - 8, MAX_SAFETENSORS_HEADER):
            raise RunLayoutError(f"{path}: not a safetensors file (header of {header_size} bytes in a {size}-byte "
                                 f"file; at most {MAX_SAFETENSORS_HEADER} are read)")
        text = stream.read(header_size)
    try:
        header = parse_json(text, f"{path}: header", error=RunLayoutError)
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise RunLayoutError(f"{path}: not a safetensors file (bad JSON header: {err})") from None
    if not isinstance(header, dict):
        raise RunLayoutError(f"{path}: not a safetensors file (the header is not a JSON object)")
    data_bytes, leaves = size - 8 - header_size, []
    for name in sorted(key for key in header if key != "__metadata__"):
        where, entry = f"{path}: tensor {name!r}", header[name]
        if not isinstance(entry, dict):
            raise RunLayoutError(f"{where}: expected an object with dtype, shape and data_offsets, found "
                                 f"{schema.found(entry)}")
        missing = [key for key in ("dtype", "shape", "data_offsets") if key not in entry]
        if missing:
            raise RunLayoutError(f"{where}: header entry lacks {', '.join(missing)}")
        dtype, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
        if not isinstance(dtype, str) or dtype not in SAFETENSORS_DTYPES:
            raise RunLayoutError(f"{where} has dtype {schema.found(dtype)}, not supported; supported: "
                                 f"{', '.join(SAFETENSORS_DTYPES)}")
        if not is_shape(shape):
            raise RunLayoutError(f"{where}: shape must be a list of integers >= 0, not {schema.found(shape)}")
        if not (is_shape(offsets) and len(offsets) == 2 and offsets[0] <= offsets[1]):
            raise RunLayoutError(f"{where}: data_offsets must be [begin, end], integers with 0 <= begin <= end, "
                                 f"not {schema.found(offsets)}")
        (begin, end), dtype = offsets, SAFETENSORS_DTYPES[dtype]
        leaves.append(_leaf(prefix + name, dtype, shape, path, 8 + header_size + begin))
        if end - begin != leaves[-1].source.nbytes or end > data_bytes:
            raise RunLayoutError(f"{where}: data_offsets [{begin}, {end}] do not hold {dtype}{list(shape)} "
                                 f"({leaves[-1].source.nbytes} bytes) within the file's {data_bytes} bytes of data")
    covered = max((leaf.source.offset - 8 - header_size + leaf.source.nbytes for leaf in leaves), default=0)
    if covered < data_bytes:
        raise RunLayoutError(f"{path}: {data_bytes - covered} bytes after the last tensor's data: longer than its "
                             "header says")
    return tuple(leaves)


def _torch_leaves(path: str, prefix: str):
    """(leaves, values that are not tensors) of a ``torch.save``'d dict of tensors (nested dicts and lists flattened,
    keys joined with ``.``); leaves None when PyTorch is not installed."""
    try:
        import torch
    except ImportError:
        return None, (" (a .pt file: PyTorch is not installed to read it; pip install torch)",)
    leaves, skipped = [], []
    for key, value in _flattened(_torch_state(path, _stamp(path)), ""):
        if not isinstance(value, torch.Tensor):
            skipped.append(f"[{key}] (a {type(value).__name__}, not a tensor)")
            continue
        dtype = str(value.dtype).removeprefix("torch.")
        try:
            lookup_dtype(dtype)
        except ValueError as err:
            raise RunLayoutError(f"{path}: tensor {key!r}: {err}") from None
        leaves.append(_leaf(prefix + key, dtype, value.shape, path, torch_key=key))
    return tuple(sorted(leaves, key=lambda leaf: leaf.name)), tuple(skipped)


def _flattened(value, key: str):
    """(key, value) of the leaves of nested dicts, lists and tuples."""
    if not isinstance(value, (Mapping, list, tuple)):
        yield key, value
        return
    for name, item in value.items() if isinstance(value, Mapping) else enumerate(value):
        yield from _flattened(item, f"{key}.{name}" if key else str(name))


def _stamp(path: str) -> tuple[int, int]:
    info = os.stat(path)
    return info.st_mtime_ns, info.st_size


@functools.lru_cache(maxsize=2)  # the two files one leaf is compared from: each loaded once per run of leaves
def _torch_state(path: str, stamp) -> object:
    import torch
    regular_file_size(path, error=RunLayoutError)
    try:
        try:
            return torch.load(path, map_location="cpu", weights_only=True, mmap=True)
        except RuntimeError:  # a file of the legacy format cannot be memory-mapped
            return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # noqa: BLE001 -- torch.load raises a dozen kinds for a bad file (pickle, zip, EOF ...)
        raise RunLayoutError(f"{path}: not a readable .pt file of tensors ({type(err).__name__}: "
                             f"{' '.join(str(err).split())[:200]})") from None


def _read_log(log_path: str, run_path: str | None = None) -> TrainingRun:
    base = os.path.dirname(os.path.abspath(log_path))
    found: dict[int, dict[str, Leaf]] = {}
    entries, notes = read_trace_log(log_path, error=RunLayoutError)
    for where, entry in entries:
        try:
            dtype = lookup_dtype(entry["dtype"]).name
        except ValueError as err:
            raise RunLayoutError(f"{where}: {err}") from None
        name, shape, digest, step = entry["leaf"], tuple(entry["shape"]), entry.get("digest"), entry["step"]
        leaf = Leaf(name, dtype, shape, None, digest)
        if entry.get("file") is not None:
            file_path = os.path.join(base, *entry["file"].split("/"))
            leaf = dataclasses.replace(_leaf(name, dtype, shape, file_path), digest=digest)
            _check_size(file_path, leaf.source.nbytes)
        leaves = found.setdefault(step, {})
        if name in leaves:
            raise RunLayoutError(f"{where}: leaf {name!r} of step {step} was recorded twice")
        leaves[name] = leaf
    if not found:
        raise RunLayoutError(f"{log_path}: empty trace log: no steps recorded")
    files = any(leaf.source for leaves in found.values() for leaf in leaves.values())
    layout = "trace log, digests" + (" and tensor files" if files else "")
    steps = {step: tuple(found[step].values()) for step in sorted(found)}
    return TrainingRun(run_path or log_path, layout, steps, notes=tuple(notes), stopped=bool(notes))


def _check_size(path: str, expected: int) -> None:
    """A file holds exactly the bytes its dtype and shape (and header) say: fewer is cut, more never compared."""
    size = regular_file_size(path, error=RunLayoutError)
    if size != expected:
        longer = "" if size < expected else ": longer than its dtype and shape say"
        raise RunLayoutError(f"{path}: {size} bytes, but its dtype and shape need {expected}{longer}")


def read_order_file(path: str) -> list[str]:
    """Leaf names, one per line; blank lines and lines starting with ``#`` are skipped."""
    hint = "give a text file of leaf names, one per line"
    with open_regular(path, hint, max_bytes=MAX_ORDER_FILE, what="--order file", error=RunLayoutError) as stream:
        text = decode_text(stream.read(), path, hint, error=RunLayoutError)
    return [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def _zip_member_blocks(path: str, member: str, chunk_bytes: int):
    """A zip member's bytes after its .npy header (decompressed while read), once it yields None (opened)."""
    with open_regular(path, error=RunLayoutError) as file, zipfile.ZipFile(file) as archive, \
            archive.open(member) as stream:
        _npy_header(stream, f"{path}[{member}]", "bfloat16")
        yield None
        while block := stream.read(chunk_bytes):
            yield memoryview(block)


def _bytes_of(array) -> memoryview:
    return memoryview(np.ascontiguousarray(array).reshape(-1).view(np.uint8))


class _BlockReader:
    """``readinto`` over blocks of bytes (memoryviews), each taken when the one before is used up;
    a read stops at the end of a block."""

    def __init__(self, blocks):
        self._blocks = iter(blocks)
        self._pending = memoryview(b"")

    def readinto(self, buffer) -> int:
        while not self._pending:
            block = next(self._blocks, None)
            if block is None:
                return 0
            self._pending = block
        take = min(len(self._pending), len(buffer))
        memoryview(buffer).cast("B")[:take] = self._pending[:take]
        self._pending = self._pending[take:]
        return take

    def close(self) -> None:
        self._blocks, self._pending = iter(()), memoryview(b"")  # a generator's files close with it
