"""cublas-det prescribe: the cures of every hazard found, verified and timed; with --lock, the lock.

For every shape and mode whose bits a hazard changed (SM count, shared handle, batch size), tries
the cures (cuBLASLt with the algorithm pinned, without split-K, planning for the fleet's smallest
SM count; BF16X9; a handle per stream), verifies each bitwise against that hazard, times it
against the mode it replaces, and reports the cheapest.
"""

from __future__ import annotations

import contextlib
import os
import sys

from .. import __version__
from ..lock import file as lockfile
from ..core.device import device_properties, fingerprint, require_gpu
from ..base.errors import ExitCode
from ..core.operands import HostOperands
from ..prescribe import lock_entries, prescribe
from ..render.prescribe import render_lock, render_prescriptions
from .common import check_outputs, command_main, describe, exit_codes, given, unless_missing, write_json
from .gemms import (QUICK_REPEATS, add_family, capture_groups, kernels_available, listing, read_options,
                    timing_budget)

EPILOG = """examples (cures that hold on H200s and H100s alike; the lock that `cublas-det run` applies):
  %(prog)s --sm-counts 132,114
  %(prog)s --lock lock.json --capture capture.json

""" + exit_codes("1 also when a hazard has no verified cure, or a GEMM could not be locked")
MOST_REPEATS = 10  # runs per scenario at most: prescribe checks every cure under every hazard


def add_arguments(parser) -> None:
    describe(parser, __doc__, EPILOG)
    add_family(parser, ("shapes", "capture", "configs", "checks", "kernels", "prescriptions", "json"),
               "prescribe runs its own checks and timing; drop {}")
    repeats = parser._option_string_actions["--repeats"]
    repeats.default = MOST_REPEATS
    repeats.help = f"runs per scenario, at most {MOST_REPEATS} ({QUICK_REPEATS} with --quick) (default: %(default)s)"


def run(args, parser) -> int:
    shapes, _, _, configs = read_options(args)
    locking = args.lock is not None  # `--lock ''` is a lock asked for, with an empty path: refused below
    if not locking:
        parser.refuse(given(args, "capture"), "--capture needs --lock here (or use bench --capture)")
    groups = capture_groups(args, parser) if args.capture else [(shapes, configs)]
    if locking:
        check_outputs(args, "lock")
    old_lock = lockfile.load(args.lock) if locking and os.path.exists(args.lock) else None
    if args.list:
        print(listing(args, groups))
        return ExitCode.OK
    check_outputs(args, "json")
    require_gpu()
    kernels = args.kernels and kernels_available(parser.prog)
    return _lock(args, groups, old_lock) if locking else _prescribe(args, shapes, configs, kernels, parser.prog)


def _steps(args) -> dict:
    """What prescribe and lock_entries take alike: the run's seed, repeats, timing and progress lines."""
    repeats = min(args.repeats, QUICK_REPEATS if args.quick else MOST_REPEATS)
    return {"fleet": args.sm_counts or (), "seed": args.seed, "repeats": repeats, "timing": timing_budget(args.quick),
            "on_step": lambda text: print(f"  {text}", file=sys.stderr, flush=True)}


def _prescribe(args, shapes, configs, kernels: bool, prog: str) -> int:
    """The cures of every hazard found; exit 1 if a hazard has none or a configuration's check failed."""
    with contextlib.closing(HostOperands(args.seed)) as operands:
        found, problems = prescribe(shapes, configs, quick=args.quick, operands=operands, kernels=kernels,
                                    **_steps(args))
    print(render_prescriptions(found, device_properties()["sm_count"], args.sm_counts or (), problems, kernels))
    written = not args.json or write_json(args.json, {"cublas_det": __version__, "provenance": fingerprint(),
                                                       "prescriptions": [p.to_dict() for p in found],
                                                       "problems": problems}, prog)
    return unless_missing(ExitCode.FINDING if problems or any(p.best is None for p in found) else ExitCode.OK,
                          written)


def _lock(args, groups, old_lock) -> int:
    """Every GEMM pinned, verified and timed, written to the lock; exit 1 if one could not be."""
    here = lockfile.where_here(fingerprint())
    if old_lock is not None:
        old_lock.check_here(here)
    entries, refused = [], []
    with contextlib.closing(HostOperands(args.seed)) as operands:
        for shapes, configs in groups:
            found, why = lock_entries(shapes, configs, operands=operands, **_steps(args))
            entries += found
            refused += why
    lock = (old_lock or lockfile.Lock(here, {}, args.lock)).merged(entries)
    lockfile.write(lock, args.lock)
    print(render_lock(lock, entries, refused))
    return ExitCode.FINDING if refused else ExitCode.OK


build_parser, main = command_main(add_arguments, run)
