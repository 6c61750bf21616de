"""The GPU and its environment: is there a usable one, and if not why (in one line); its properties; the
fingerprint a result records (GPU, driver, CUDA runtime, cuBLAS, CuPy, the variables that change cuBLAS)."""

from __future__ import annotations

import ctypes
import functools
import os
import platform
import re
import sys
import uuid

import numpy

from ..bindings import cublas as _cublas
from ..bindings.cublas import CublasError, CublasNotFoundError, library
from ..base.errors import CublasDetError, DoesNotFit


class NoGpuError(CublasDetError, RuntimeError):
    """No GPU can run cuBLAS here; the message is one line saying why and what to do."""


# What to install for CuPy and the CUDA libraries, per CUDA major: pyproject.toml's cuda12 extra and its twin.
def install_command(cuda_major: int) -> str:
    return (f"pip install 'cupy-cuda{cuda_major}x>=14,<15' 'cuda-toolkit[cublas,cudart,nvrtc]=={cuda_major}.*' "
            "'ml-dtypes>=0.4'")


INSTALL_HINT = install_command(12) + " (the cuda12 extra; for CUDA 13: cupy-cuda13x and ==13.*)"

# The oldest Linux driver branch that runs each CUDA major version (any minor release of it).
MIN_DRIVER_BRANCH = {12: "R525 (525.60.13)", 13: "R580 (580.65.06)"}


def gpu_unavailable_reason() -> str | None:
    """Why no GPU can be used (one line): no CuPy, driver, device or libcublas; else None."""
    try:
        import cupy
    except ImportError as err:
        return f"CuPy is not installed ({err}); install it: {INSTALL_HINT}"
    runtime = cupy.cuda.runtime
    try:
        count = runtime.getDeviceCount()
    except runtime.CUDARuntimeError as err:
        text = str(err)
        status = getattr(err, "status", None)
        # cudaErrorStubLibrary (34), cudaErrorInsufficientDriver (35): no driver, or one too old (cudaDriverGetVersion).
        if status in (34, 35) or "InsufficientDriver" in text:
            return driver_reason(runtime.driverGetVersion(), runtime.runtimeGetVersion(), kernel_module_version())
        if status == 100 or "NoDevice" in text:  # cudaErrorNoDevice
            return f"no GPU available: no CUDA device visible ({text}); check CUDA_VISIBLE_DEVICES"
        return f"no GPU available: CUDA could not be initialised ({text})"
    if count == 0:
        return "no GPU available: no CUDA device visible; check CUDA_VISIBLE_DEVICES"
    try:
        library()
    except CublasNotFoundError as err:
        return str(err)
    return None


def driver_reason(driver_version: int, runtime_version: int, module_version: str | None) -> str:
    """Why the CUDA runtime refused the driver (``driver_version`` 0: none loaded), in one line."""
    if driver_version == 0:
        return ("no GPU available: no NVIDIA driver found (libcuda.so.1 is not loadable); "
                "run on a machine with an NVIDIA GPU and its driver")
    driver_major, runtime_major = driver_version // 1000, runtime_version // 1000
    driver_text, runtime_text = cuda_version_text(driver_version), cuda_version_text(runtime_version)
    older = driver_major < runtime_major
    needed = (older and MIN_DRIVER_BRANCH.get(runtime_major)) or f"a driver for CUDA {runtime_text}"
    fix = "upgrade the driver"
    if older and driver_major in MIN_DRIVER_BRANCH:
        fix += f", or use CuPy for CUDA {driver_major}: {install_command(driver_major)} (the cuda{driver_major} extra)"
    installed = f"NVIDIA driver {module_version}" if module_version else "the NVIDIA driver"
    return (f"driver too old: {installed} supports CUDA up to {driver_text}, but CuPy's CUDA runtime is "
            f"{runtime_text}, which needs {needed} or newer; {fix}")


def kernel_module_version(path: str = "/proc/driver/nvidia/version") -> str | None:
    try:
        with open(path) as file:
            first = file.readline()
    except OSError:
        return None
    match = re.search(r"Kernel Module\s+(?:for \S+\s+)?(\d+\.\d+(?:\.\d+)?)", first)
    return match.group(1) if match else None


_cached_reason = functools.cache(gpu_unavailable_reason)


def require_gpu() -> None:
    reason = _cached_reason()
    if reason is not None:
        raise NoGpuError(reason)


def gpu_available() -> bool:
    return _cached_reason() is None


def device_properties(device_id: int | None = None) -> dict:
    """Name, compute capability, SM count, L2 and memory size, PCI bus and UUID of a device (default: current)."""
    import cupy
    if device_id is None:
        device_id = cupy.cuda.runtime.getDevice()
    props = cupy.cuda.runtime.getDeviceProperties(device_id)
    name = props["name"]
    try:  # tells physical GPUs apart in a multi-GPU report
        pci_bus_id = cupy.cuda.runtime.deviceGetPCIBusId(device_id)
    except (AttributeError, cupy.cuda.runtime.CUDARuntimeError):
        pci_bus_id = None
    return {"device_id": device_id, "name": name.decode() if isinstance(name, bytes) else str(name),
            "compute_capability": f"{props['major']}.{props['minor']}", "sm_count": int(props["multiProcessorCount"]),
            "l2_cache_bytes": int(props["l2CacheSize"]), "total_memory_bytes": int(props["totalGlobalMem"]),
            "pci_bus_id": pci_bus_id, "uuid": gpu_uuid(_uuid_bytes(device_id, props.get("uuid")))}


def _uuid_bytes(device_id: int, raw) -> bytes | None:
    """The device's 16 UUID bytes. CuPy's property stops at the first NUL byte, so a UUID that holds one is
    asked of the driver (cuDeviceGetUuid_v2)."""
    if isinstance(raw, (bytes, bytearray)) and len(raw) == 16:
        return bytes(raw)
    try:
        driver = ctypes.CDLL("libcuda.so.1")
        device, found = ctypes.c_int(), (ctypes.c_char * 16)()
        if driver.cuDeviceGet(ctypes.byref(device), device_id) or driver.cuDeviceGetUuid_v2(found, device):
            return None
    except (OSError, AttributeError):
        return None
    return found.raw


def gpu_uuid(raw) -> str | None:
    """The device's UUID as nvidia-smi writes it (``GPU-bd284568-...``), or None."""
    if not isinstance(raw, (bytes, bytearray)) or len(raw) != 16:
        return None
    return f"GPU-{uuid.UUID(bytes=bytes(raw))}"


def cuda_version_text(value: int) -> str:
    """CUDA encodes versions as 1000*major + 10*minor (13000 -> '13.0')."""
    return f"{value // 1000}.{value % 1000 // 10}"


def gpu_failures() -> tuple[type[BaseException], ...]:
    """The exceptions a GPU phase may raise without a bug (recorded as the phase's error; the rest propagate)."""
    import cupy
    return (cupy.cuda.memory.OutOfMemoryError, cupy.cuda.runtime.CUDARuntimeError, cupy.cuda.driver.CUDADriverError,
            CublasError, DoesNotFit, MemoryError)


# Variables that change what cuBLAS computes or how CuPy calls it, recorded with every result.
_NAMED_VARS = ("NVIDIA_TF32_OVERRIDE", "CUPY_TF32", "CUDA_VISIBLE_DEVICES", "CUDA_MODULE_LOADING")
_VAR_PREFIXES = ("CUBLAS_", "CUBLASLT_")


def cublas_env_vars() -> dict[str, str]:
    return dict(sorted((name, value) for name, value in os.environ.items()
                       if name in _NAMED_VARS or name.startswith(_VAR_PREFIXES)))


def tf32_env_warnings(mode_is_tf32: bool) -> list[str]:
    warnings = []
    if os.environ.get("CUPY_TF32", "0").strip() == "1" and not mode_is_tf32:
        warnings.append("CUPY_TF32=1: cupy.matmul asks for CUBLAS_COMPUTE_32F_FAST_TF32, which a PEDANTIC or "
                        "DEFAULT math mode does not override, so CuPy's GEMMs still use TF32; unset CUPY_TF32")
    if os.environ.get("NVIDIA_TF32_OVERRIDE", "").strip() == "0" and mode_is_tf32:
        warnings.append("NVIDIA_TF32_OVERRIDE=0 disables TF32 in every NVIDIA library: TF32 was requested "
                        "but fp32 arithmetic will run; unset NVIDIA_TF32_OVERRIDE")
    return warnings


def fingerprint(device_id: int | None = None) -> dict:
    """Where a result came from: GPU, driver, CUDA runtime, cuBLAS, CuPy, env vars, host (needs a GPU)."""
    import cupy
    runtime = cupy.cuda.runtime
    _, library_path, found_via = _cublas.library()
    version = _cublas.cublas_get_version()
    return {"gpu": device_properties(device_id), "driver_version": cuda_version_text(runtime.driverGetVersion()),
            "runtime_version": cuda_version_text(runtime.runtimeGetVersion()),
            "cublas_version": f"{version // 10000}.{version // 100 % 100}.{version % 100}",
            "cublas_library": library_path, "cublas_found_via": found_via, "cupy_version": cupy.__version__,
            "numpy_version": numpy.__version__, "python_version": platform.python_version(),
            "platform": platform.platform(), "hostname": platform.node(), "python": sys.executable,
            "env": cublas_env_vars()}


# What the bits depend on, each as a :func:`fingerprint` record names it.
MACHINE_PARTS = {
    "gpu": lambda info, gpu: gpu.get("name", "?"),
    "cc": lambda info, gpu: f"cc {gpu.get('compute_capability', '?')}",
    "sm_count": lambda info, gpu: f"{gpu.get('sm_count', '?')} SMs",
    "pci": lambda info, gpu: f"PCI {gpu['pci_bus_id']}" if gpu.get("pci_bus_id") else "",
    "driver": lambda info, gpu: f"driver {info.get('driver_version', '?')}",
    "cublas": lambda info, gpu: f"cuBLAS {info.get('cublas_version', '?')}",
}


def describe_machine(info: dict, parts=("gpu", "sm_count", "driver", "cublas"), in_parentheses=()) -> str:
    """``NVIDIA H200, 132 SMs, driver 13.0``: the ``parts`` of a fingerprint (``in_parentheses``: ``(132 SMs)``)."""
    gpu = info.get("gpu") or {}
    described = ""
    for part in parts:
        text = MACHINE_PARTS[part](info, gpu)
        if text:
            described += (f" ({text})" if part in in_parentheses else f", {text}") if described else text
    return described
