import warnings

import pytest

from cublas_det import (
    ComputeType,
    GemmConfig,
    MathMode,
    NoGpuError,
    create_handle,
    math_mode,
)
from cublas_det.bindings import cublas as _cublas
from cublas_det.bindings.cublas import AtomicsMode
from cublas_det.core.config import ModeSource

from .conftest import needs_no_gpu


# -- enums and parsing (CPU) -------------------------------------------------------------------
def test_enum_values_match_cublas_13_headers():
    assert (MathMode.DEFAULT, MathMode.PEDANTIC, MathMode.TF32) == (0, 2, 3)
    assert MathMode.DISALLOW_REDUCED_PRECISION_REDUCTION == 16
    assert (ComputeType.COMPUTE_32F, ComputeType.COMPUTE_32F_PEDANTIC, ComputeType.COMPUTE_32F_FAST_TF32) == (68, 69, 77)
    assert (ComputeType.COMPUTE_16F, ComputeType.COMPUTE_64F, ComputeType.COMPUTE_32I) == (64, 70, 72)
    assert (ComputeType.COMPUTE_32F_FAST_16F, ComputeType.COMPUTE_32F_FAST_16BF) == (74, 75)
    assert (AtomicsMode.NOT_ALLOWED, AtomicsMode.ALLOWED) == (0, 1)


def test_env_is_read_at_call_time_and_a_bad_value_fails_before_gpu_work(monkeypatch):
    monkeypatch.setenv("CUBLAS_DET_MATH_MODE", "turbo")
    with pytest.raises(ValueError, match="CUBLAS_DET_MATH_MODE='turbo'"):
        create_handle()


@pytest.mark.parametrize("size", [-1, 1.5, "32MiB", True])
def test_bad_workspace_size_is_a_value_error(size):
    with pytest.raises(ValueError, match="workspace_bytes"):
        create_handle("pedantic", workspace_bytes=size)


@needs_no_gpu
def test_without_gpu_create_handle_says_why():
    with pytest.raises(NoGpuError, match="^no GPU available: "):
        create_handle("pedantic")


# -- on the GPU --------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("mode", [MathMode.PEDANTIC, MathMode.DEFAULT, MathMode.TF32,
                                  MathMode.TF32 | MathMode.DISALLOW_REDUCED_PRECISION_REDUCTION])
def test_mode_set_by_argument_is_read_back(mode):
    with create_handle(mode) as handle:
        assert handle.read_math_mode() == int(mode)
        assert handle.math_mode_value == int(mode)
        assert handle.math_mode == MathMode(int(mode) & 0xF)
        assert handle.mode_source is ModeSource.ARGUMENT


@pytest.mark.gpu
@pytest.mark.parametrize("text, mode", [("pedantic", 2), ("DEFAULT", 0), ("tf32", 3), ("", 2)])
def test_mode_set_by_env_is_read_back(monkeypatch, text, mode):
    monkeypatch.setenv("CUBLAS_DET_MATH_MODE", text)
    with create_handle() as handle:
        assert handle.read_math_mode() == mode
        assert handle.mode_source is (ModeSource.ENV if text else ModeSource.DEFAULT)


@pytest.mark.gpu
def test_use_after_close_is_a_clear_error_and_close_is_idempotent():
    handle = create_handle("pedantic")
    handle.close()
    handle.close()
    assert handle.closed
    with pytest.raises(RuntimeError, match="closed; make a new one with create_handle"):
        handle.read_math_mode()
    with pytest.raises(RuntimeError, match="closed"):
        handle.ptr


@pytest.mark.gpu
def test_ten_thousand_create_close_cycles_leave_device_memory_unchanged():
    import cupy

    for _ in range(20):  # the first handles load kernels and the default workspace pool
        create_handle("pedantic").close()
    cupy.cuda.Device().synchronize()
    free_before, _ = cupy.cuda.runtime.memGetInfo()
    for _ in range(10_000):
        create_handle("pedantic").close()
    cupy.cuda.Device().synchronize()
    free_after, _ = cupy.cuda.runtime.memGetInfo()
    assert free_after == free_before, f"leaked {free_before - free_after} bytes"


@pytest.mark.gpu
def test_atomics_workspace_sm_count_and_stream_round_trip():
    import cupy

    from cupy_backends.cuda.libs import cublas

    stream = cupy.cuda.Stream(non_blocking=True)
    with create_handle("default", stream=stream, workspace_bytes=32 * 2**20, atomics=True) as handle:
        assert _cublas.cublas_get_atomics_mode(handle.ptr) == AtomicsMode.ALLOWED  # create_handle's atomics=True
        assert handle.workspace_bytes == 32 * 2**20
        assert handle.stream is stream
        assert cublas.getStream(handle.ptr) == stream.ptr  # cuBLAS's own, through CuPy's binding as core/call.py's
        assert handle.sm_count_target == 0
        handle.sm_count_target = 66
        assert handle.sm_count_target == 66
        handle.sm_count_target = 0
        assert handle.sm_count_target == 0
        with pytest.raises(ValueError, match="sm_count_target"):
            handle.sm_count_target = -1
    with create_handle("default") as handle:
        assert _cublas.cublas_get_atomics_mode(handle.ptr) == AtomicsMode.NOT_ALLOWED and handle.workspace_bytes is None


@pytest.mark.gpu
def test_math_mode_scope_restores_cupy_handle_even_on_exception(monkeypatch):
    import cupy

    monkeypatch.delenv("CUPY_TF32", raising=False)
    shared = cupy.cuda.device.get_cublas_handle()
    before = _cublas.cublas_get_math_mode(shared)
    with pytest.raises(KeyError):
        with math_mode("tf32"):
            assert _cublas.cublas_get_math_mode(shared) == MathMode.TF32
            raise KeyError("boom")
    assert _cublas.cublas_get_math_mode(shared) == before
    with math_mode("pedantic") as value:
        assert value == MathMode.PEDANTIC == _cublas.cublas_get_math_mode(shared)
    assert _cublas.cublas_get_math_mode(shared) == before


@pytest.mark.gpu
def test_math_mode_scope_warns_when_env_defeats_it(monkeypatch):
    monkeypatch.setenv("CUPY_TF32", "1")
    with pytest.warns(RuntimeWarning, match="CUPY_TF32=1"):
        with math_mode("pedantic"):
            pass
    monkeypatch.delenv("CUPY_TF32")
    monkeypatch.setenv("NVIDIA_TF32_OVERRIDE", "0")
    with pytest.warns(RuntimeWarning, match="NVIDIA_TF32_OVERRIDE=0"):
        with math_mode("tf32"):
            pass
    monkeypatch.delenv("NVIDIA_TF32_OVERRIDE")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with math_mode("tf32"):
            pass


@pytest.mark.gpu
@pytest.mark.all_math_modes
def test_plugin_handle_follows_the_parametrized_mode(cublas_handle, cublas_math_mode):
    assert cublas_handle.read_math_mode() == cublas_math_mode


# -- default handles, one per thread -------------------------------------------------------------
def test_default_handles_are_per_thread_per_device_per_config(monkeypatch):
    """On the CPU: create_handle is replaced by a recorder, so the keying itself is what is tested."""
    import threading

    from cublas_det.core import handle as _handle

    made = []

    class FakeHandle:
        closed = False

    def fake_create(mode=None):
        made.append(FakeHandle())
        return made[-1]

    monkeypatch.setattr(_handle, "create_handle", fake_create)
    monkeypatch.setattr(_handle, "_current_device", lambda: 0)
    monkeypatch.setattr(_handle, "_thread_handles", threading.local())  # none left by earlier tests
    monkeypatch.delenv("CUBLAS_DET_MATH_MODE", raising=False)
    main = _handle.default_handle()
    assert _handle.default_handle() is main  # reused in the same thread
    seen = []
    worker = threading.Thread(target=lambda: seen.extend([_handle.default_handle(), _handle.default_handle()]))
    worker.start()
    worker.join()
    assert seen[0] is seen[1] and seen[0] is not main  # another thread, another handle
    monkeypatch.setenv("CUBLAS_DET_MATH_MODE", "tf32")
    assert _handle.default_handle() is not main  # another configuration, another handle
    monkeypatch.setattr(_handle, "_current_device", lambda: 1)
    monkeypatch.delenv("CUBLAS_DET_MATH_MODE")
    assert _handle.default_handle() is not main  # another device, another handle
    assert len(made) == 4


@pytest.mark.gpu
def test_gemm_without_a_handle_uses_one_handle_per_thread():
    import threading

    import cupy

    from cublas_det import gemm
    from cublas_det.core import handle as _handle

    a = cupy.ones((64, 64), cupy.float32)
    handles, outputs = {}, {}

    def work(name):
        outputs[name] = gemm(a, a)
        cupy.cuda.get_current_stream().synchronize()
        handles[name] = _handle.default_handle()

    threads = [threading.Thread(target=work, args=(name,)) for name in ("first", "second")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert handles["first"] is not handles["second"] and handles["first"].ptr != handles["second"].ptr
    assert float(outputs["first"][0, 0]) == float(outputs["second"][0, 0]) == 64.0


@pytest.mark.gpu
def test_a_configuration_travels_to_cublas_set_math_mode():
    config = GemmConfig(MathMode.TF32, disallow_reduced_precision_reduction=True)
    with create_handle(config) as handle:
        assert handle.config is config and handle.read_math_mode() == 3 | 16 == config.math_mode_value
