"""``python -m cublas_det``: the environment fingerprint, and a handle made in each math mode.

Exits 2 with one line on stderr when no GPU can be used.
"""

from __future__ import annotations

import sys

from ._cli import EXIT_OK, ArgumentParser, run_guarded


def _report() -> int:
    from ._cublas import MathMode
    from ._device import require_gpu
    from ._env import tf32_env_warnings
    from ._handle import create_handle
    from ._provenance import fingerprint
    from .config import math_mode_name

    require_gpu()
    info = fingerprint()
    gpu = info.pop("gpu")
    env = info.pop("env")
    print("cublas_det environment")
    print(f"  GPU                 {gpu['name']} (device {gpu['device_id']}, compute capability "
          f"{gpu['compute_capability']}, {gpu['sm_count']} SMs, L2 {gpu['l2_cache_bytes'] // 2**20} MiB)")
    for key, value in info.items():
        print(f"  {key:<19} {value}")
    print("  cuBLAS-relevant environment variables:" + ("" if env else " none set"))
    for name, value in env.items():
        print(f"    {name}={value}")
    print("handles (mode set, then read back with cublasGetMathMode):")
    for mode in (MathMode.PEDANTIC, MathMode.DEFAULT, MathMode.TF32):
        with create_handle(mode) as handle:
            print(f"  {mode.name:<9} -> {math_mode_name(handle.read_math_mode())}")
    with create_handle() as handle:
        print(f"  create_handle() with no argument -> {math_mode_name(handle.read_math_mode())} "
              f"(from {handle.mode_source.value})")
        for message in tf32_env_warnings(handle.math_mode == MathMode.TF32):
            print(f"  warning: {message}", file=sys.stderr)
    return EXIT_OK


def _check_env() -> None:
    """A bad CUBLAS_DET_MATH_MODE is a usage error before the GPU is probed (one line, exit 2)."""
    from .config import resolve_config
    from .errors import UsageError

    try:
        resolve_config(None)
    except ValueError as err:
        raise UsageError(str(err)) from None


def main(argv: list[str] | None = None) -> int:

    parser = ArgumentParser(prog="python -m cublas_det", description=__doc__.strip().splitlines()[0])
    parser.parse_args(sys.argv[1:] if argv is None else argv)  # --help, or a usage error for anything else

    def body() -> int:
        _check_env()
        return _report()

    return run_guarded("python -m cublas_det", body)


if __name__ == "__main__":
    sys.exit(main())
