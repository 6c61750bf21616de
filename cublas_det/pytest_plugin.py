"""pytest plugin (entry point ``pytest11``): ``@pytest.mark.gpu`` skips without a GPU, and so does a test
that asks for ``cublas_handle``, marked or not; ``cublas_handle`` is a :class:`cublas_det.Handle` in
``cublas_config`` (``--cublas-math-mode``, else ``CUBLAS_DET_MATH_MODE``, else PEDANTIC; its math mode alone
is ``cublas_math_mode``); ``@pytest.mark.all_math_modes`` runs a test once per math mode."""

from __future__ import annotations

import pytest

from .bindings.cublas import MathMode
from .core.config import DEFAULT_MODES, FLAG_NAME, MODE_CHOICES, GemmConfig, math_modes, resolve_config
from .core.device import NoGpuError, require_gpu
from .core.handle import create_handle
from .base.words import WIDTH, wrapped

ALL_MODES = tuple(mode.name for mode in math_modes(DEFAULT_MODES))
ACCEPTED = f"{', '.join(MODE_CHOICES)}, optionally +{FLAG_NAME.choice}"  # what --cublas-math-mode takes


def pytest_addoption(parser):
    parser.getgroup("cublas_det").addoption(
        "--cublas-math-mode", default=None, metavar="MODE",
        help=f"math mode for the cublas_handle fixture: {ACCEPTED} (default: $CUBLAS_DET_MATH_MODE, else pedantic)")


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: the test needs an NVIDIA GPU; skipped with the reason when none is usable")
    config.addinivalue_line("markers", f"all_math_modes: run the test once per cuBLAS math mode ({', '.join(ALL_MODES)})")
    option = config.getoption("--cublas-math-mode")
    if option is not None:
        try:
            parsed = GemmConfig.parse(option, source="--cublas-math-mode")
        except ValueError:  # parse's own message offers the +lt forms too, which this option refuses
            raise _usage(f"--cublas-math-mode={option!r}: not {ACCEPTED}") from None
        if parsed.api != "gemm_ex":  # the fixture is a math mode's handle: an Lt configuration would be lost
            raise _usage(f"--cublas-math-mode={option!r}: a math mode, not a cuBLASLt configuration, which "
                         f"create_handle({option!r}) makes in the test; it takes {ACCEPTED}")


def _usage(text: str) -> pytest.UsageError:
    """pytest's usage error, its lines within the width after pytest's ``ERROR: ``."""
    return pytest.UsageError("\n".join(wrapped(text, WIDTH - len("ERROR: "), "  ")))


def pytest_generate_tests(metafunc):
    if (metafunc.definition.get_closest_marker("all_math_modes") is not None
            and {"cublas_math_mode", "cublas_handle"} & set(metafunc.fixturenames)):
        metafunc.parametrize("cublas_math_mode", ALL_MODES, indirect=True, ids=[m.lower() for m in ALL_MODES])


def skip_without_gpu() -> None:
    """Skip the test, with the reason, where no GPU is usable: a test marked ``gpu``, or one that asks for a
    fixture that needs one (``cublas_handle``), marked or not."""
    try:
        require_gpu()  # probes once per process
    except NoGpuError as err:  # raised here, not a skip mark: `pytest -ra` folds every skip into one line
        pytest.skip(str(err))


@pytest.hookimpl(tryfirst=True)  # before fixtures such as cublas_handle are set up
def pytest_runtest_setup(item):
    if item.get_closest_marker("gpu") is not None:
        skip_without_gpu()


@pytest.fixture
def cublas_math_mode(request):
    """The math mode under test: the all_math_modes parameter, --cublas-math-mode, the env var, or PEDANTIC."""
    param = getattr(request, "param", None)
    if param is not None:
        return MathMode[param]
    return resolve_config(request.config.getoption("--cublas-math-mode"))[0].math_mode


@pytest.fixture
def cublas_config(request, cublas_math_mode) -> GemmConfig:
    """The configuration of ``cublas_handle``: the all_math_modes parameter's math mode, else
    --cublas-math-mode's or the env var's whole (``+disallow-rpr`` kept), else PEDANTIC."""
    if request.node.get_closest_marker("all_math_modes") is not None:
        return GemmConfig(cublas_math_mode)
    return resolve_config(request.config.getoption("--cublas-math-mode"))[0]


@pytest.fixture
def cublas_handle(request, cublas_config):
    """A cuBLAS handle in ``cublas_config``, closed after the test; its ``mode_source`` is ``env`` or
    ``default``, or ``argument`` when parametrized or ``--cublas-math-mode`` is given."""
    explicit = (request.node.get_closest_marker("all_math_modes") is not None
                or request.config.getoption("--cublas-math-mode") is not None)
    skip_without_gpu()
    with create_handle(cublas_config if explicit else None) as handle:
        yield handle
