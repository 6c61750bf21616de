"""Why no GPU can be used, said precisely: no CuPy, no driver, a driver too old for CuPy's runtime."""

import ast
import pathlib
import re
import subprocess
import sys

import pytest
from packaging.requirements import Requirement

from cublas_det.core import device as _device

from .conftest import unwrapped


def test_no_driver_loaded():
    reason = _device.driver_reason(0, 12090, None)
    assert reason.startswith("no GPU available: no NVIDIA driver found")
    assert "NVIDIA GPU and its driver" in reason


def test_driver_older_than_the_runtime_names_both_and_both_fixes():
    reason = _device.driver_reason(12020, 13000, "535.104.05")
    assert "\n" not in reason
    assert reason.startswith("driver too old: NVIDIA driver 535.104.05 supports CUDA up to 12.2")
    assert "CuPy's CUDA runtime is 13.0, which needs R580 (580.65.06) or newer" in reason
    assert "upgrade the driver" in reason
    assert ("pip install 'cupy-cuda12x>=14,<15' 'cuda-toolkit[cublas,cudart,nvrtc]==12.*' 'ml-dtypes>=0.4' (the "
            "cuda12 extra") in reason


def test_driver_of_the_same_major_version_gets_no_other_cupy():
    reason = _device.driver_reason(12000, 12090, None)
    assert reason.startswith("driver too old: the NVIDIA driver supports CUDA up to 12.0")
    assert "needs a driver for CUDA 12.9 or newer; upgrade the driver" in reason
    assert "cupy-cuda" not in reason


def test_driver_too_old_for_any_supported_cupy_only_upgrade():
    reason = _device.driver_reason(11080, 12090, "520.61.05")
    assert "needs R525 (525.60.13) or newer; upgrade the driver" in reason
    assert "cupy-cuda11x" not in reason


def test_kernel_module_version_both_driver_flavours(tmp_path):
    proprietary = tmp_path / "proprietary"
    proprietary.write_text("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023\n")
    open_module = tmp_path / "open"
    open_module.write_text("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.65.06  Release Build\n")
    assert _device.kernel_module_version(str(proprietary)) == "535.104.05"
    assert _device.kernel_module_version(str(open_module)) == "580.65.06"
    assert _device.kernel_module_version(str(tmp_path / "absent")) is None


def test_missing_cupy_is_not_called_a_missing_gpu(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)  # import cupy now raises ImportError
    reason = _device.gpu_unavailable_reason()
    assert reason.startswith("CuPy is not installed (")
    assert "GPU" not in reason
    assert _device.INSTALL_HINT in reason


def test_install_hint_names_what_the_cuda12_extra_installs():
    """The hint must name packages the index has: the cuda12 extra's, not cublas-det (not on the index)."""
    pyproject = (pathlib.Path(__file__).resolve().parent.parent / "pyproject.toml").read_text()
    extra = ast.literal_eval(re.search(r"^cuda12 = (\[.*\])$", pyproject, re.M).group(1))
    hinted = re.findall(r"'([^']+)'", _device.INSTALL_HINT)
    assert {str(Requirement(r)) for r in hinted} == {str(Requirement(r)) for r in extra}
    assert "cublas-det" not in _device.INSTALL_HINT


def test_entry_without_cupy_is_one_line_exit_2():
    code = "import sys; sys.modules['cupy'] = None; from cublas_det.bench import main; sys.exit(main([]))"
    result = subprocess.run([sys.executable, "-c", code], cwd=pathlib.Path(__file__).resolve().parent.parent,
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 2
    lines = unwrapped(result.stderr).strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert ": error: CuPy is not installed (" in lines[0]


def test_gpu_uuid_is_written_as_nvidia_smi_writes_it():
    raw = bytes.fromhex("bd28456887afc5ff665f3718c892de74")
    assert _device.gpu_uuid(raw) == "GPU-bd284568-87af-c5ff-665f-3718c892de74"  # as nvidia-smi -L shows it
    assert _device.gpu_uuid(None) is None and _device.gpu_uuid(b"short") is None and _device.gpu_uuid("text") is None


def test_a_uuid_cut_at_a_nul_byte_is_asked_of_the_driver(monkeypatch):
    raw = bytes.fromhex("bd28456887afc5ff665f3718c892de74")
    assert _device._uuid_bytes(0, raw) == raw  # CuPy's whole 16 bytes are used as they are

    class Driver:  # libcuda: device 0 is CUdevice 0, and its UUID holds a NUL byte
        def cuDeviceGet(self, device, ordinal):
            device._obj.value = ordinal
            return 0

        def cuDeviceGetUuid_v2(self, uuid, device):
            uuid.raw = bytes.fromhex("bd00456887afc5ff665f3718c892de74")
            return 0

    monkeypatch.setattr(_device.ctypes, "CDLL", lambda name: Driver())
    assert _device.gpu_uuid(_device._uuid_bytes(0, b"\xbd")) == "GPU-bd004568-87af-c5ff-665f-3718c892de74"
    monkeypatch.setattr(_device.ctypes, "CDLL", lambda name: (_ for _ in ()).throw(OSError("no libcuda")))
    assert _device._uuid_bytes(0, b"\xbd") is None  # no driver: no UUID, never a wrong one


@pytest.mark.gpu
def test_the_driver_gives_this_gpu_the_uuid_cupy_and_nvml_give_it():
    import cupy

    raw = cupy.cuda.runtime.getDeviceProperties(0)["uuid"]
    from_driver = _device._uuid_bytes(0, b"")  # a cut UUID: asked of the driver
    assert from_driver is not None and len(from_driver) == 16
    assert from_driver.startswith(raw)  # CuPy's bytes, whole or up to a NUL byte
    assert _device.device_properties(0)["uuid"] == _device.gpu_uuid(from_driver)
    pynvml = pytest.importorskip("pynvml", reason="NVML's UUID needs nvidia-ml-py")
    pynvml.nvmlInit()
    try:
        handle = pynvml.nvmlDeviceGetHandleByPciBusId(_device.device_properties(0)["pci_bus_id"])
        uuid = pynvml.nvmlDeviceGetUUID(handle)
        assert (uuid.decode() if isinstance(uuid, bytes) else uuid) == _device.gpu_uuid(from_driver)
    finally:
        pynvml.nvmlShutdown()


def test_one_describer_names_a_machine_for_runs_sweeps_and_the_title():
    info = {"gpu": {"name": "NVIDIA H200", "sm_count": 132, "compute_capability": "9.0"},
            "driver_version": "13.0", "cublas_version": "13.1.0"}
    assert _device.describe_machine(info) == "NVIDIA H200, 132 SMs, driver 13.0, cuBLAS 13.1.0"
    # The benchmark's title before it read the describer: its own punctuation, "?" for what is missing.
    title = ("gpu", "sm_count", "cublas", "driver")
    assert _device.describe_machine(info, title, ("sm_count",)) == "NVIDIA H200 (132 SMs), cuBLAS 13.1.0, driver 13.0"
    assert _device.describe_machine({}, title, ("sm_count",)) == "? (? SMs), cuBLAS ?, driver ?"
    assert _device.describe_machine(info, ("pci", "sm_count", "gpu"), ("sm_count",)) == "132 SMs, NVIDIA H200"
