"""Shared test helpers. The `gpu` marker and the cublas fixtures come from cublas_det's pytest plugin."""
pytest_plugins = ["pytester"]


import importlib.util
import pathlib

import numpy as np
import pytest

from cublas_det import gpu_available

needs_no_gpu = pytest.mark.skipif(gpu_available(), reason="checks the no-GPU path; a GPU is present")


def host_operands(m, n, k, trans_a=False, trans_b=False, seed=0):
    """Seeded random normal float32 operands in their stored (possibly transposed) layout."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((k, m) if trans_a else (m, k), dtype=np.float32)
    b = rng.standard_normal((n, k) if trans_b else (k, n), dtype=np.float32)
    return a, b


def fp64_product(a, b, trans_a=False, trans_b=False):
    """op(a) @ op(b) in float64 on the GPU (cupy arrays in, cupy array out)."""
    a64 = a.astype("float64")
    b64 = b.astype("float64")
    return (a64.T if trans_a else a64) @ (b64.T if trans_b else b64)


def load_bench_script(name: str):
    """A script of bench/ (not a package) imported as a module, for its functions."""
    path = pathlib.Path(__file__).resolve().parent.parent / "bench" / name
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
