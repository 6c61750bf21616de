"""The Recorder: log lines, full-mode files, names and steps, NumPy/PyTorch/CuPy inputs, no host copy."""

import json

import numpy as np
import pytest

from cublas_det.bits.digest import ALGORITHM, host_digest
from cublas_det.rundiff import recorder as recorder_module
from cublas_det.rundiff.diff import diff_runs
from cublas_det.rundiff.layouts import open_run
from cublas_det.trace import Recorder


def _lines(directory):
    return [json.loads(line) for line in (directory / "trace.jsonl").read_text().splitlines()]


def test_digest_mode_writes_one_line_per_tensor_in_recording_order(tmp_path):
    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    with Recorder(tmp_path / "run") as recorder:
        recorder.record(0, "w", w)
        recorder.record(0, "b", np.ones(3, np.float16))
        recorder.record(1, "w", w * 2)
    lines = _lines(tmp_path / "run")
    assert [(line["step"], line["leaf"]) for line in lines] == [(0, "w"), (0, "b"), (1, "w")]
    assert lines[0] == {"step": 0, "leaf": "w", "dtype": "float32", "shape": [2, 3], "digest": host_digest(w),
                        "algorithm": ALGORITHM}
    assert lines[1]["dtype"] == "float16" and lines[2]["digest"] == host_digest(w * 2)
    assert not any((tmp_path / "run").glob("step_*"))  # digests only: no tensor files


def test_full_mode_writes_c_order_bytes_and_names_them(tmp_path):
    w = np.asfortranarray(np.arange(12, dtype=np.float32).reshape(3, 4))
    with Recorder(tmp_path / "run", mode="full") as recorder:
        recorder.record(3, "layer1/dW", w)
        recorder.record(3, "act", np.ones(5, np.float32), mode="digest")
    first, second = _lines(tmp_path / "run")
    assert first["file"] == "step_3/layer1/dW.bin" and "file" not in second
    data = (tmp_path / "run" / "step_3" / "layer1" / "dW.bin").read_bytes()
    assert data == np.ascontiguousarray(w).tobytes() and first["digest"] == host_digest(w)
    run = open_run(str(tmp_path / "run"))
    assert [leaf.name for leaf in run.steps[3]] == ["layer1/dW", "act"]
    assert run.steps[3][0].source is not None and run.steps[3][1].source is None


def test_log_lines_are_written_when_the_step_changes(tmp_path):
    recorder = Recorder(tmp_path / "run")
    recorder.record(0, "x", np.zeros(2, np.float32))
    assert (tmp_path / "run" / "trace.jsonl").read_text() == ""
    recorder.record(1, "x", np.zeros(2, np.float32))
    assert len(_lines(tmp_path / "run")) == 1
    recorder.close()
    recorder.close()
    assert len(_lines(tmp_path / "run")) == 2 and recorder.closed
    with pytest.raises(ValueError, match="closed"):
        recorder.record(2, "x", np.zeros(2, np.float32))


def test_recorded_runs_compare_like_dumps(tmp_path):
    for run, bump in (("a", 0.0), ("b", 1e-3)):
        with Recorder(tmp_path / run) as recorder:
            for step in range(3):
                recorder.record(step, "w", np.full(4, step + (bump if step == 2 else 0), np.float32))
    diff = diff_runs(open_run(str(tmp_path / "a")), open_run(str(tmp_path / "b")))
    assert diff.verdict() == "first divergence at step 2 in leaf w; all of steps 0-1 equal"


@pytest.mark.parametrize("step, name, message", [
    (-1, "x", "step must be an integer >= 0"), (True, "x", "step must be"), (1.5, "x", "step must be"),
    (0, "", "non-empty"), (0, "/abs", "relative path"), (0, "a/../b", "relative path"), (0, "a\\b", "backslashes"),
    (0, "a//b", "relative path"), (0, 7, "non-empty string"),
])
def test_bad_steps_and_names(tmp_path, step, name, message):
    with Recorder(tmp_path / "run") as recorder, pytest.raises(ValueError, match=message):
        recorder.record(step, name, np.zeros(1, np.float32))


def test_numpy_integer_steps_are_fine(tmp_path):
    with Recorder(tmp_path / "run") as recorder:
        recorder.record(np.int64(4), "x", np.zeros(1, np.float32))
    assert _lines(tmp_path / "run")[0]["step"] == 4


def test_duplicates_modes_types_and_existing_logs(tmp_path):
    with Recorder(tmp_path / "run") as recorder:
        recorder.record(0, "x", np.zeros(1, np.float32))
        with pytest.raises(ValueError, match="already recorded in step 0"):
            recorder.record(0, "x", np.zeros(1, np.float32))
        with pytest.raises(ValueError, match="mode must be one of digest, full"):
            recorder.record(0, "y", np.zeros(1, np.float32), mode="partial")
        with pytest.raises(TypeError, match="cannot record a builtins.list"):
            recorder.record(0, "z", [1.0, 2.0])
        with pytest.raises(ValueError, match="not supported"):
            recorder.record(0, "c", np.zeros(2, np.complex64))
    with pytest.raises(FileExistsError, match="trace.jsonl exists"):
        Recorder(tmp_path / "run")
    with Recorder(tmp_path / "run", overwrite=True) as recorder:
        recorder.record(5, "x", np.zeros(1, np.float32))
    assert [line["step"] for line in _lines(tmp_path / "run")] == [5]
    with pytest.raises(ValueError, match="mode must be one of"):
        Recorder(tmp_path / "other", mode="digests")


def test_bfloat16_numpy_arrays(tmp_path):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    values = np.arange(8).astype(ml_dtypes.bfloat16)
    with Recorder(tmp_path / "run", mode="full") as recorder:
        recorder.record(0, "g", values)
    line = _lines(tmp_path / "run")[0]
    assert line["dtype"] == "bfloat16" and line["digest"] == host_digest(values.view(np.uint16))


def test_cpu_torch_tensors_through_dlpack(tmp_path):
    torch = pytest.importorskip("torch")
    w = torch.arange(12, dtype=torch.float32).reshape(3, 4).requires_grad_()
    g = torch.linspace(-1, 1, 6, dtype=torch.bfloat16)
    with Recorder(tmp_path / "run", mode="full") as recorder:
        recorder.record(0, "w", w.t())  # non-contiguous, with grad: recorded as its C-order values
        recorder.record(0, "g", g)
    w_line, g_line = _lines(tmp_path / "run")
    assert w_line["shape"] == [4, 3] and w_line["digest"] == host_digest(w.detach().t().contiguous().numpy())
    assert g_line["dtype"] == "bfloat16" and g_line["digest"] == host_digest(g.view(torch.int16).numpy())


def test_dlpack_producers_other_than_torch(tmp_path):
    class Producer:  # a minimal DLPack producer around a numpy array
        def __init__(self, array):
            self._array = array

        def __dlpack__(self, **kwargs):
            return self._array.__dlpack__(**kwargs)

        def __dlpack_device__(self):
            return self._array.__dlpack_device__()

    values = np.arange(5, dtype=np.int32)
    with Recorder(tmp_path / "run") as recorder:
        recorder.record(0, "v", Producer(values))
    assert _lines(tmp_path / "run")[0]["digest"] == host_digest(values)


# -- on the GPU ----------------------------------------------------------------------------------
@pytest.fixture
def forbid_host_copies(monkeypatch):
    """Record the size of every device-to-host copy CuPy makes; fail on one of a large array."""
    import cupy

    copies = []
    original_get = cupy.ndarray.get
    original_asnumpy = cupy.asnumpy

    def get(self, *args, **kwargs):
        copies.append(self.nbytes)
        return original_get(self, *args, **kwargs)

    def asnumpy(array, *args, **kwargs):
        copies.append(getattr(array, "nbytes", 0))
        return original_asnumpy(array, *args, **kwargs)

    monkeypatch.setattr(cupy.ndarray, "get", get)
    monkeypatch.setattr(cupy, "asnumpy", asnumpy)
    return copies


@pytest.mark.gpu
def test_gpu_digest_mode_makes_no_host_copy_and_matches_numpy(tmp_path, forbid_host_copies):
    import cupy

    host = np.random.default_rng(0).standard_normal((4096, 4096), dtype=np.float32)  # cupy.random needs cuRAND
    tensors = {"big": cupy.asarray(host),  # 64 MiB
               "odd": cupy.arange(1001, dtype=cupy.float16), "view": None}
    tensors["view"] = tensors["big"][:, 1:7]  # not contiguous, not 16-byte aligned
    with Recorder(tmp_path / "run") as recorder:
        for step in range(3):
            for name, tensor in tensors.items():
                recorder.record(step, name, tensor)
    assert max(forbid_host_copies) <= 16 * 3  # the sums of one step: 16 bytes per tensor
    forbid_host_copies.clear()
    lines = _lines(tmp_path / "run")
    expected = {name: host_digest(cupy.asnumpy(tensor)) for name, tensor in tensors.items()}
    assert [line["digest"] for line in lines] == [expected[line["leaf"]] for line in lines]
    assert len(lines) == 9


@pytest.mark.gpu
def test_gpu_tensors_on_several_streams_and_many_pending_digests(tmp_path, monkeypatch):
    import cupy

    monkeypatch.setattr(recorder_module, "_SLOTS", 5)  # forces flushes in the middle of a step
    streams = [cupy.cuda.Stream(non_blocking=True) for _ in range(3)]
    tensors = []
    with Recorder(tmp_path / "run") as recorder:
        for i in range(13):
            with streams[i % 3]:
                tensor = cupy.full(100_003, i, dtype=cupy.float32)
                tensors.append(tensor)
                recorder.record(0, f"t{i}", tensor)
    lines = _lines(tmp_path / "run")
    assert [line["digest"] for line in lines] == [host_digest(cupy.asnumpy(t)) for t in tensors]


@pytest.mark.gpu
def test_gpu_full_mode_and_digest_mode_runs_compare_equal(tmp_path):
    import cupy

    for run, mode in (("full", "full"), ("digest", "digest")):
        with Recorder(tmp_path / run, mode=mode) as recorder:
            for step in range(2):
                recorder.record(step, "w", cupy.arange(64 * 64, dtype=cupy.float32).reshape(64, 64) * step)
    diff = diff_runs(open_run(str(tmp_path / "full")), open_run(str(tmp_path / "digest")))
    assert diff.identical and diff.steps[0].leaves[0].compared_by == "digest"


@pytest.mark.gpu
def test_gpu_torch_tensors_through_dlpack(tmp_path, forbid_host_copies):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("this PyTorch has no CUDA")
    w = torch.randn(1024, 513, device="cuda")
    g = w.to(torch.bfloat16)
    with Recorder(tmp_path / "run") as recorder:
        recorder.record(0, "w", w)
        recorder.record(0, "g", g)
        recorder.record(0, "wt", w.t())
    assert max(forbid_host_copies) <= 16 * 3
    w_line, g_line, wt_line = _lines(tmp_path / "run")
    assert w_line["digest"] == host_digest(w.cpu().numpy())
    assert g_line["dtype"] == "bfloat16" and g_line["digest"] == host_digest(g.cpu().view(torch.int16).numpy())
    assert wt_line["shape"] == [513, 1024] and wt_line["digest"] == host_digest(w.t().contiguous().cpu().numpy())
