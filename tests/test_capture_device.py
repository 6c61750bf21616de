"""The capture's GPU: its compute capability in the device's form ("9.0", as device_properties and the lock
give it; an int, the form the capture once took, still reads), and no empty ``gpu`` written (files that hold
one still read)."""

import json

from cublas_det.apilog import file as capture_file
from cublas_det.apilog.findings import findings, major
from cublas_det.apilog.model import Capture, Site
from cublas_det.core.definition import GemmDefinition
from cublas_det.cli import capture as capture_cli

from .test_capture import log, parse



def _workspace_finding(compute_capability) -> str:
    """The small-workspace finding of a GEMM with a 1 MiB workspace: below Hopper's recommended 32 MiB."""
    capture = Capture()
    definition = GemmDefinition("cublasGemmEx", transa="N", transb="N", m=64, n=64, k=64, lda=64, ldb=64, ldc=64,
                                a_type="R_32F", b_type="R_32F", c_type="R_32F", compute_type="COMPUTE_32F", algo=-1,
                                math_mode=0, workspace_bytes=1 << 20)
    capture.add_gemm(definition, Site(1, "0xa", "0x1", 7))
    return next(f.text for f in findings(capture, {definition: "g1"}, compute_capability) if f.id == "small-workspace")


def test_the_compute_capability_is_the_devices_string_and_an_int_still_reads():
    assert [major(cc) for cc in ("9.0", "10.0", "8.6", 90, 86, None, "")] == [9, 10, 8, 9, 8, None, None]
    hopper = _workspace_finding("9.0")
    assert hopper == _workspace_finding(90) and "32 MiB" in hopper.split(":")[0]
    assert "32 MiB" not in _workspace_finding("8.6") and "(the GPU is unknown" in _workspace_finding(None)


def test_the_capture_cli_asks_the_device_for_its_compute_capability(monkeypatch):
    monkeypatch.setattr(capture_cli, "device_properties", lambda: {"compute_capability": "9.0", "name": "H200"})
    assert capture_cli._compute_capability() == "9.0"
    monkeypatch.setattr(capture_cli, "device_properties", lambda: 1 / 0)
    assert capture_cli._compute_capability() is None


def test_no_empty_gpu_is_written_and_a_file_with_one_still_reads():
    data = capture_file.to_dict(parse(log("block", "cublas"), log("block", "cublaslt")), complete=True)
    assert "gpu" not in data
    old = json.loads(json.dumps({**data, "gpu": {}}))
    assert capture_file.from_data(old, "old.json").gemms == capture_file.from_data(data, "new.json").gemms
