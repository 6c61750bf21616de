import os
import pickle

import pytest

from cublas_det import CublasError
from cublas_det.bindings import cublas as _cublas


def test_error_message_names_status_meaning_and_function():
    err = CublasError(7, "cublasSetMathMode")
    assert str(err) == ("CUBLAS_STATUS_INVALID_VALUE (7): an unsupported value or parameter was passed "
                        "[cublasSetMathMode]")
    assert err.status == 7 and err.function == "cublasSetMathMode"


def test_error_with_unknown_status_still_formats():
    assert str(CublasError(999)) == "CUBLAS_STATUS_UNKNOWN (999): unknown status code"


def test_error_pickles_with_its_fields():
    err = pickle.loads(pickle.dumps(CublasError(15, "cublasGemmEx")))
    assert isinstance(err, CublasError)
    assert (err.status, err.function) == (15, "cublasGemmEx")
    assert "CUBLAS_STATUS_NOT_SUPPORTED" in str(err)


def test_a_status_raises_only_on_failure():
    _cublas._check(0, "cublasCreate")
    with pytest.raises(CublasError, match=r"CUBLAS_STATUS_ALLOC_FAILED \(3\).*\[cublasCreate\]"):
        _cublas._check(3, "cublasCreate")


def test_every_prototype_has_the_documented_symbol_names():
    # _v2 suffix where cublas_api.h #defines it, none where it does not (ecosystem.md §1.9).
    names = set(_cublas._PROTOTYPES)
    assert {"cublasCreate_v2", "cublasDestroy_v2", "cublasSetStream_v2",
            "cublasSetWorkspace_v2", "cublasGetVersion_v2"} <= names
    assert {"cublasSetMathMode", "cublasGetMathMode", "cublasSetAtomicsMode", "cublasGetAtomicsMode",
            "cublasSetSmCountTarget", "cublasGetSmCountTarget", "cublasGemmEx"} <= names
    assert len(_cublas._PROTOTYPES["cublasGemmEx"]) == 19


@pytest.mark.gpu
def test_library_is_the_one_cupy_loaded():
    import cupy_backends.cuda.libs.cublas as cupy_cublas  # noqa: F401  (loads CuPy's copy first)
    from cuda import pathfinder

    _, path, _ = _cublas.library()
    assert path == pathfinder.load_nvidia_dynamic_lib("cublas").abs_path
    with open("/proc/self/maps") as maps:
        loaded = {os.path.realpath(line.split()[-1]) for line in maps if "/libcublas.so" in line}
    assert loaded == {os.path.realpath(path)}  # one copy in the process, and it is ours


@pytest.mark.gpu
def test_invalid_value_becomes_cublas_error():
    handle = _cublas.cublas_create()
    try:
        with pytest.raises(CublasError) as info:
            _cublas.cublas_set_math_mode(handle, 12345)
        assert info.value.status == 7 and info.value.function == "cublasSetMathMode"
    finally:
        _cublas.cublas_destroy(handle)
