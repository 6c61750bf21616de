"""cublas-det env (python -m cublas_det): the environment fingerprint, where the CUDA libraries are, a
handle in each mode."""

from __future__ import annotations

import os
import sys
from importlib import metadata

from ..bindings.cublas import MathMode
from ..core.config import DEFAULT_MODES, math_mode_name, resolve_config
from ..core.device import INSTALL_HINT, fingerprint, require_gpu, tf32_env_warnings
from ..base.errors import ExitCode, UsageError
from ..core.handle import create_handle
from ..base.words import report_width, size, table, wrapped
from .common import WITHOUT_GPU, command_main, describe, exit_codes

DESCRIPTION = """Print the environment fingerprint (GPU, SM count, driver, CUDA runtime, cuBLAS version
and library file, CuPy, the environment variables that change cuBLAS), where libcublas, cudart and
NVRTC were found, and the math mode read back from a handle made in each mode.

Without a usable GPU it prints one line saying why and exits 2; --libs needs no GPU: it says which
libraries were found, how to install those missing, and what runs without them."""

# The CUDA libraries cuBLAS work needs (what the cuda12 / cuda13 extras install), as cuda.pathfinder names them.
LIBRARIES = {"cublas": "libcublas", "cudart": "cudart", "nvrtc": "NVRTC"}

EPILOG = exit_codes("1 also with --libs when a library was not found (the command to install it is printed)",
                    "2 also for no CuPy")


def library_locations() -> dict[str, tuple[str, str]]:
    """Where libcublas, cudart and NVRTC load from, found as CuPy 14 finds them (no GPU needed):
    pathfinder name -> ``(PATH, "found via HOW; wheel DIST VERSION")`` or ``("", "not found: WHY")``."""
    try:
        from cuda import pathfinder
    except ImportError as err:
        return {name: ("", f"not found: cuda.pathfinder is not installed ({err})") for name in LIBRARIES}
    found = {}
    for name in LIBRARIES:
        try:
            loaded = pathfinder.load_nvidia_dynamic_lib(name)
        except pathfinder.DynamicLibNotFoundError as err:
            found[name] = ("", f"not found: {' '.join(str(err).split())}")
            continue
        how = [f"found via {loaded.found_via}"] if getattr(loaded, "found_via", None) else ["found"]
        wheel = _owning_distribution(loaded.abs_path)
        found[name] = (loaded.abs_path, "; ".join(how + ([f"wheel {wheel}"] if wheel else [])))
    return found


def _owning_distribution(path: str) -> str | None:
    """``"name version"`` of the installed distribution that holds ``path`` (a pip wheel), if any."""
    real, base = os.path.realpath(path), os.path.basename(path)
    for dist in metadata.distributions():
        for file in dist.files or ():
            if file.name == base and os.path.realpath(dist.locate_file(file)) == real:
                return f"{dist.metadata['Name']} {dist.version}"
    return None


def _print_libraries() -> list[str]:
    """Print where each library was found; return the names of those not found."""
    found = library_locations()
    print("CUDA libraries (cuda.pathfinder, the search CuPy makes):")
    for name, (path, how) in found.items():  # the path whole on its own line, to copy
        print("\n".join(wrapped(how, report_width(), "    ", f"  {LIBRARIES[name]}: ") + ([f"    {path}"] if path else [])))
    return [LIBRARIES[name] for name, (path, _) in found.items() if not path]


def _report() -> int:
    require_gpu()
    info = fingerprint()
    gpu, env = info.pop("gpu"), info.pop("env")
    print("cublas_det environment")
    gpu_line = (f"{gpu['name']} (device {gpu['device_id']}, compute capability {gpu['compute_capability']}, "
                f"{gpu['sm_count']} SMs, L2 {size(gpu['l2_cache_bytes'], 'MiB')})")
    print("\n".join(table([("GPU", gpu_line), *((key, str(value)) for key, value in info.items())], "  ", " ")))
    print("  cuBLAS-relevant environment variables:" + ("" if env else " none set"))
    for name, value in env.items():
        print(f"    {name}={value}")
    _print_libraries()
    print("handles (mode set, then read back with cublasGetMathMode):")
    read_back = []
    for mode in (MathMode[name.upper()] for name in DEFAULT_MODES):
        with create_handle(mode) as handle:
            read_back.append((mode.name, "->", math_mode_name(handle.read_math_mode())))
    print("\n".join(table(read_back, "  ", " ")))
    with create_handle() as handle:
        print(f"  create_handle() with no argument -> {math_mode_name(handle.read_math_mode())} "
              f"(from {handle.mode_source.value})")
        for message in tf32_env_warnings(handle.math_mode == MathMode.TF32):
            print(f"  warning: {message}", file=sys.stderr)
    return ExitCode.OK


def add_arguments(parser) -> None:
    describe(parser, DESCRIPTION, EPILOG, slice(None))
    parser.add_argument("--libs", action="store_true",
                        help="only print where libcublas, cudart and NVRTC were found (no GPU needed)")


def run(args, parser) -> int:
    if args.libs:  # a report of what is here, found or not: a library missing is its finding, not an error
        missing = _print_libraries()
        if missing:
            print("\n".join(wrapped(f"missing: {', '.join(missing)}; for a GPU, install them: {INSTALL_HINT}; "
                                     f"{WITHOUT_GPU}", report_width())))
        return ExitCode.FINDING if missing else ExitCode.OK
    try:  # a bad CUBLAS_DET_MATH_MODE is a usage error before the GPU is probed
        resolve_config(None)
    except ValueError as err:
        raise UsageError(str(err)) from None
    return _report()


build_parser, main = command_main(add_arguments, run)
