"""Shared test helpers. The `gpu` marker and the cublas fixtures come from cublas_det's pytest plugin."""
pytest_plugins = ["pytester"]


import importlib.metadata
import importlib.util
import pathlib
import runpy
import subprocess
import sys
import types

import numpy as np
import pytest

from cublas_det import gpu_available
from cublas_det.render.text import summary_lines, warnings_for
from cublas_det.store.results import to_json

# Every documented install passes: `.[test]` alone has no CuPy nor CUDA libraries, and a test that needs them
# (through CuPy's import, or what a GPU install says without a GPU) skips with this reason.
needs_cuda_extra = pytest.mark.skipif(importlib.util.find_spec("cupy") is None,
                                      reason="needs the cuda12 or cuda13 extra (CuPy, the CUDA libraries)")


def bench_json(result) -> dict:
    """The run file bench --json writes of ``result``: the store's record of it, with the report's lines."""
    return to_json(result, summary_lines(result), warnings_for(result))


def needs_no_gpu(test):
    """The no-GPU path of a GPU install: skipped where a GPU is present, or where CuPy is not installed."""
    no_gpu = pytest.mark.skipif(gpu_available(), reason="checks the no-GPU path; a GPU is present")
    return needs_cuda_extra(no_gpu(test))
ROOT = pathlib.Path(__file__).resolve().parent.parent
BIN = pathlib.Path(sys.executable).parent  # where pip put the console scripts


def _run_as_typed(command: str, args) -> int | str | None:
    """``command ARGS`` as Python runs it from a shell: ``python -m M``, ``bench/X.py`` or a console script."""
    words = command.split()
    if words[:2] == ["python", "-m"]:  # the module's code as __main__, with its spec, as runpy does
        spec = importlib.util.find_spec(words[2])
        if spec.submodule_search_locations is not None:  # a package: its __main__
            spec = importlib.util.find_spec(f"{words[2]}.__main__")
        main = types.ModuleType("__main__")
        main.__spec__, main.__file__, main.__package__, main.__loader__ = spec, spec.origin, spec.parent, spec.loader
        sys.modules["__main__"], sys.argv = main, [spec.origin, *args]
        exec(compile(pathlib.Path(spec.origin).read_text(), spec.origin, "exec"), main.__dict__)
    elif words[0].startswith("bench/"):
        sys.argv = [str(ROOT / words[0]), *args]
        runpy.run_path(str(ROOT / words[0]), run_name="__main__")
    else:  # what pip's launcher runs: the entry point's function, under a __main__ without a spec
        (script,) = importlib.metadata.entry_points(group="console_scripts", name=words[0])
        sys.argv = [str(BIN / words[0]), *words[1:], *args]
        sys.modules["__main__"] = types.ModuleType("__main__")
        return script.load()()
    return 0


def pytest_collection_finish(session):
    """Start what a test module's fixtures wait for (``start_early(items)``: builds, interpreters) once
    the session knows which of its tests run: it runs while the tests before them do."""
    selected: dict = {}
    for item in session.items:
        selected.setdefault(getattr(item, "module", None), []).append(item)
    for module, items in selected.items():
        if hasattr(module, "start_early"):
            module.start_early(items)


@pytest.fixture
def typed(capsys, monkeypatch):
    """Run a command line in this process as a subprocess would: ``typed("python -m cublas_det.diff", a, b)``.

    Its name in messages is the one the user typed; returns a CompletedProcess (exit code, stdout,
    stderr). For behaviour; tests of the process boundary itself run a real interpreter.
    """
    def run(command: str, *args, env: dict | None = None) -> subprocess.CompletedProcess:
        args = [str(arg) for arg in args]
        with monkeypatch.context() as patch:
            patch.setattr(sys, "argv", list(sys.argv))
            patch.setitem(sys.modules, "__main__", sys.modules["__main__"])
            for name, value in (env or {}).items():
                patch.setenv(name, value)
            capsys.readouterr()
            try:
                code = _run_as_typed(command, args)
            except SystemExit as stop:
                code = stop.code
            out, err = capsys.readouterr()
        if isinstance(code, str):  # sys.exit("message"): printed on stderr, exit 1
            code, err = 1, err + code + "\n"
        result = subprocess.CompletedProcess([command, *args], code or 0, out, unwrapped(err))
        result.printed_stderr = err  # as printed, each line within 100 columns
        return result

    return run


def unwrapped(stderr: str) -> str:
    """``stderr`` with each error or warning message on one line again: error_line wraps a message to 100
    columns, its continuation lines indented (test_every_error_line_fits_100_columns holds the width).
    A line continues a message when it is indented and its first word would not have fit on the line before."""
    lines, last = [], ""  # last: the line printed before, as printed
    for line in stderr.splitlines(keepends=True):
        message = bool(lines) and (": error: " in lines[-1] or ": warning: " in lines[-1])
        if message and line.startswith("  ") and line.strip() and len(last.rstrip("\n")) + 1 + len(line.split()[0]) > 100:
            lines[-1] = lines[-1].rstrip("\n") + " " + line.strip() + "\n"
        else:
            lines.append(line)
        last = line
    return "".join(lines)


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
    path = ROOT / "bench" / name
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def nvrtc_ptx(source: str, name: str) -> str:
    """``source`` compiled as CuPy compiles it (NVRTC, for Hopper), without a GPU: its PTX; the test is
    skipped where there is no CuPy or libnvrtc to compile with, and fails with NVRTC's log on an error."""
    try:
        from cupy_backends.cuda.libs import nvrtc

        nvrtc.getVersion()
    except Exception as err:
        pytest.skip(f"NVRTC not available: {err}")
    program = nvrtc.createProgram(source, name, [], [])
    try:
        nvrtc.compileProgram(program, ["-arch=compute_90"])
    except Exception as err:
        pytest.fail(f"{err}\n{nvrtc.getProgramLog(program)}")
    ptx = nvrtc.getPTX(program)
    return ptx.decode() if isinstance(ptx, bytes) else ptx
