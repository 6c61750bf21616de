from cublas_det.core import device as _device
from cublas_det.core import device as _env
from cublas_det.core.config import MathMode, ModeSource, resolve_config


def test_empty_math_mode_var_means_unset(monkeypatch):
    monkeypatch.setenv("CUBLAS_DET_MATH_MODE", "  ")
    assert resolve_config(None)[1] is ModeSource.DEFAULT
    monkeypatch.delenv("CUBLAS_DET_MATH_MODE")
    assert resolve_config(None)[1] is ModeSource.DEFAULT
    monkeypatch.setenv("CUBLAS_DET_MATH_MODE", " tf32 ")
    config, source = resolve_config(None)
    assert config.math_mode is MathMode.TF32 and source is ModeSource.ENV


def test_cublas_env_vars_records_every_variable_that_changes_cublas(monkeypatch):
    for name in list(_env.cublas_env_vars()):
        monkeypatch.delenv(name)
    monkeypatch.setenv("NVIDIA_TF32_OVERRIDE", "0")
    monkeypatch.setenv("CUPY_TF32", "1")
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    monkeypatch.setenv("CUBLAS_EMULATE_SINGLE_PRECISION", "1")
    monkeypatch.setenv("CUBLAS_EMULATION_STRATEGY", "eager")
    monkeypatch.setenv("CUBLAS_DET_MATH_MODE", "tf32")
    monkeypatch.setenv("CUBLASLT_LOG_LEVEL", "2")
    monkeypatch.setenv("UNRELATED_VAR", "x")
    found = _env.cublas_env_vars()
    assert found == {
        "CUBLASLT_LOG_LEVEL": "2", "CUBLAS_DET_MATH_MODE": "tf32", "CUBLAS_EMULATE_SINGLE_PRECISION": "1",
        "CUBLAS_EMULATION_STRATEGY": "eager", "CUBLAS_WORKSPACE_CONFIG": ":4096:8", "CUPY_TF32": "1",
        "NVIDIA_TF32_OVERRIDE": "0",
    }
    assert list(found) == sorted(found)


def test_tf32_warnings(monkeypatch):
    monkeypatch.delenv("CUPY_TF32", raising=False)
    monkeypatch.delenv("NVIDIA_TF32_OVERRIDE", raising=False)
    assert _env.tf32_env_warnings(False) == [] and _env.tf32_env_warnings(True) == []
    monkeypatch.setenv("CUPY_TF32", "1")
    (message,) = _env.tf32_env_warnings(False)
    assert "CUPY_TF32=1" in message and "unset CUPY_TF32" in message
    assert _env.tf32_env_warnings(True) == []
    monkeypatch.setenv("NVIDIA_TF32_OVERRIDE", "0")
    (message,) = _env.tf32_env_warnings(True)
    assert "NVIDIA_TF32_OVERRIDE=0" in message


def test_cuda_version_text():
    assert _device.cuda_version_text(13000) == "13.0"
    assert _device.cuda_version_text(12080) == "12.8"


def test_libs_fits_100_columns_with_a_long_path(typed, monkeypatch):
    from cublas_det.cli import env

    path = "/root/.pyenv/versions/3.12.7/lib/python3.12/site-packages/nvidia/cu13/lib/libcublas.so.13"
    where = (path, "found via site-packages; wheel nvidia-cublas 13.1.0.3")  # one line of 156 columns before
    monkeypatch.setattr(env, "library_locations", lambda: {name: where for name in env.LIBRARIES})
    result = typed("cublas-det env", "--libs")
    lines = result.stdout.splitlines()
    assert result.returncode == 0 and max(len(line) for line in lines) <= 100, result.stdout
    assert lines.count(f"    {path}") == 3 and lines.count(f"  libcublas: {where[1]}") == 1
