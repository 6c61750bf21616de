"""Recording a run's named tensors, step by step, into ``DIR/trace.jsonl`` for ``cublas-det diff``
(docs/diff.md): a digest per tensor, hashed on the GPU on the current CuPy stream, and in ``"full"`` mode
its bytes in ``DIR/step_<N>/<leaf>.bin``. Do not overwrite a tensor from another stream before its step
is flushed. Not thread-safe."""

from __future__ import annotations

import dataclasses
import json
import operator
import os

import numpy as np

from ..bits.digest import ALGORITHM, finish, host_digest, queue_device_sums
from ..bits.streams import dtype_name_of, lookup_dtype
from ..store.trace_log import LOG_NAME

MODES = ("digest", "full")
_SLOTS = 4096  # digests pending on the GPU before a flush is forced (16 bytes each)


@dataclasses.dataclass(frozen=True)
class _Tensor:
    """A tensor as a NumPy or CuPy array whose bytes are the tensor's, with the tensor's dtype name."""

    array: object
    dtype: str
    shape: tuple[int, ...]
    on_gpu: bool

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * lookup_dtype(self.dtype).itemsize


class _DeviceSums:
    """One device's digest sums, two uint64 per pending tensor, and the streams that fill them."""

    def __init__(self, device_id: int):
        import cupy
        self.device_id = device_id
        with cupy.cuda.Device(device_id):
            self.sums = cupy.zeros((_SLOTS, 2), dtype=cupy.uint64)
            self.copy_stream = cupy.cuda.Stream(non_blocking=True)
        self.used = 0
        self.last_event_per_stream: dict[int, object] = {}

    def queue(self, array) -> int:
        """Queue the digest kernel of ``array`` on the current stream; return its slot."""
        import cupy
        slot = self.used
        with cupy.cuda.Device(self.device_id):
            queue_device_sums(array, self.sums[slot])
            stream = cupy.cuda.get_current_stream()
            self.last_event_per_stream[stream.ptr] = stream.record()
        self.used += 1
        return slot

    def collect(self) -> np.ndarray:
        """The filled sums on the host, once their kernels have run (copied on a stream of our own)."""
        import cupy
        with cupy.cuda.Device(self.device_id), self.copy_stream:  # the copy stream belongs to that device
            for event in self.last_event_per_stream.values():
                self.copy_stream.wait_event(event)
            host = self.sums[:self.used].get(stream=self.copy_stream)
        self.used = 0
        self.last_event_per_stream.clear()
        return host


class Recorder:
    """Record named tensors per step into ``directory`` (made if needed; an existing ``trace.jsonl`` only with
    ``overwrite``), ``mode`` ``"digest"`` (default) or ``"full"``."""

    def __init__(self, directory: str | os.PathLike, mode: str = "digest", *, overwrite: bool = False):
        self.mode = _check_mode(mode)
        self.directory = os.fspath(directory)
        os.makedirs(self.directory, exist_ok=True)
        self.log_path = os.path.join(self.directory, LOG_NAME)
        if os.path.exists(self.log_path) and not overwrite:
            raise FileExistsError(f"{self.log_path} exists: record into a new directory, or pass overwrite=True")
        self._log = open(self.log_path, "w", encoding="utf-8")
        self._pending: list[tuple[dict, int, int | None, int | None]] = []  # line, bytes, device and slot of its sums
        self._recorded: set[tuple[int, str]] = set()
        self._devices: dict[int, _DeviceSums] = {}
        self._step: int | None = None

    @property
    def closed(self) -> bool:
        return self._log is None

    def record(self, step: int, name: str, array, *, mode: str | None = None) -> None:
        """Record tensor ``name`` of ``step``: a CuPy, NumPy or PyTorch array (or any DLPack producer).
        Raises ValueError (bad step, name, dtype or mode; a name twice in a step), TypeError (no array)."""
        if self._log is None:
            raise ValueError("this Recorder is closed")
        step = _check_step(step)
        name = _check_name(name)
        mode = self.mode if mode is None else _check_mode(mode)
        if (step, name) in self._recorded:
            raise ValueError(f"leaf {name!r} was already recorded in step {step}; give each tensor of a step "
                             "its own name")
        tensor = as_tensor(array)
        if self._step is not None and step != self._step:
            self.flush()  # the previous step's digests have long been computed: this rarely waits
        self._step = step
        line = {"step": step, "leaf": name, "dtype": tensor.dtype, "shape": list(tensor.shape), "digest": None,
                "algorithm": ALGORITHM}
        device = slot = None
        if tensor.on_gpu:
            device = tensor.array.device.id
            slot = self._device_sums(device).queue(tensor.array)
        else:
            line["digest"] = host_digest(tensor.array)
        if mode == "full":
            line["file"] = self._write(step, name, tensor)
        self._recorded.add((step, name))
        self._pending.append((line, tensor.nbytes, device, slot))

    def flush(self) -> None:
        """Write the log lines of everything recorded so far (waits for pending GPU digests)."""
        if not self._pending:
            return
        sums = {device_id: device.collect() for device_id, device in self._devices.items() if device.used}
        for line, nbytes, device, slot in self._pending:
            if line["digest"] is None:
                s1, s2 = (int(value) for value in sums[device][slot])
                line["digest"] = finish(s1, s2, nbytes)
        self._log.write("\n".join(json.dumps(line) for line, *_ in self._pending) + "\n")
        self._log.flush()
        self._pending.clear()

    def close(self) -> None:
        """Flush and close the log (idempotent)."""
        if self._log is not None:
            try:
                self.flush()
            finally:
                self._log.close()
                self._log = None

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _device_sums(self, device_id: int) -> _DeviceSums:
        device = self._devices.get(device_id)
        if device is None:
            device = self._devices[device_id] = _DeviceSums(device_id)
        elif device.used == _SLOTS:
            self.flush()
        return device

    def _write(self, step: int, name: str, tensor: _Tensor) -> str:
        relative = f"step_{step}/{name}.bin"
        path = os.path.join(self.directory, *relative.split("/"))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        host = tensor.array.get() if tensor.on_gpu else tensor.array  # full mode: the bytes must reach the disk
        np.ascontiguousarray(host).reshape(-1).view(np.uint8).tofile(path)
        return relative


def as_tensor(array) -> _Tensor:
    """A NumPy/CuPy view of ``array``'s bytes with its dtype name (DLPack producers too); no host
    copy for GPU tensors; bfloat16 PyTorch tensors pass through DLPack as int16."""
    module = type(array).__module__.split(".")[0]
    if isinstance(array, (np.ndarray, np.generic)):
        return _tensor(np.asarray(array), on_gpu=False)
    if module == "cupy":
        return _tensor(array, on_gpu=True)
    if module == "torch":
        return _from_torch(array)
    if hasattr(array, "__dlpack__") and hasattr(array, "__dlpack_device__"):
        device_type = int(array.__dlpack_device__()[0])
        if device_type in (2, 13):  # kDLCUDA, kDLCUDAManaged
            import cupy
            return _tensor(cupy.from_dlpack(array), on_gpu=True)
        if device_type in (1, 3):  # kDLCPU, kDLCUDAHost
            return _tensor(np.from_dlpack(array), on_gpu=False)
        raise TypeError(f"cannot record a tensor on DLPack device type {device_type}: only CPU and CUDA")
    raise TypeError(f"cannot record a {type(array).__module__}.{type(array).__name__}: give a CuPy, NumPy or "
                    "PyTorch array (or another DLPack producer)")


def _tensor(array, on_gpu: bool) -> _Tensor:
    return _Tensor(array, dtype_name_of(array.dtype), tuple(array.shape), on_gpu)


def _from_torch(tensor) -> _Tensor:
    import torch
    name = str(tensor.dtype).removeprefix("torch.")
    lookup_dtype(name)  # ValueError for an unsupported dtype, before anything is copied
    shape = tuple(tensor.shape)
    tensor = tensor.detach().contiguous()
    if name == "bfloat16":
        tensor = tensor.view(torch.int16)
    if tensor.is_cuda:
        import cupy
        return _Tensor(cupy.from_dlpack(tensor), name, shape, True)
    return _Tensor(np.from_dlpack(tensor), name, shape, False)


def _check_mode(mode) -> str:
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    return mode


def _check_step(step) -> int:
    try:
        value = None if isinstance(step, bool) else operator.index(step)
    except TypeError:
        value = None
    if value is None or value < 0:
        raise ValueError(f"step must be an integer >= 0, not {repr(step) if value is None else step}")
    return value


def _check_name(name) -> str:
    """A leaf name is a relative path of non-empty parts (``/`` makes subdirectories in full mode)."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"leaf name must be a non-empty string, not {name!r}")
    if "\\" in name or "\0" in name or any(part in ("", ".", "..") for part in name.split("/")):
        raise ValueError(f"leaf name {name!r} must be a relative path of non-empty parts without '.', '..', "
                         "backslashes or NUL (e.g. 'layer1.dW' or 'layer1/dW')")
    return name
