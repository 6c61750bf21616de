"""cublas-det sweep: do all the GPUs here give the same bits?

Runs each shape and mode on every chosen GPU, one worker process per GPU (and --scenarios inside
it), and reports whether all devices give the same bits. No timing.
"""

from __future__ import annotations

import sys
import time

from .. import __version__
from ..check.devices import INTERRUPTED, agreements, parse_devices, run_sweep, sweep_failed
from ..core.device import fingerprint, require_gpu
from ..base.errors import ExitCode, UsageError
from ..store.run import now_iso
from ..render.sweep import render_sweep, sweep_summary
from ..store.results import sweep_to_json
from ..base.words import plural
from .common import command_main, describe, exit_codes, write_json, write_text
from .gemms import add_family, baseline, exit_code, listing, print_comparison, quick_help, read_options

EPILOG = """examples:
  %(prog)s --devices all --json a.json     # same bits on every GPU here?
  %(prog)s --devices 0,3 --compare a.json  # ... and the same as a.json?

a cluster: let its launcher start one run per node, each writing its file, then compare the files:
  srun --ntasks-per-node=1 sh -c 'cublas-det sweep --json node-$(hostname).json'

""" + exit_codes("1 also when the devices disagree")


def add_arguments(parser) -> None:
    describe(parser, __doc__, EPILOG)
    add_family(parser, ("devices", "shapes", "configs", "scenarios", "checks", "json", "reports"),
               "a sweep computes every shape and mode in worker processes, and times nothing; drop {}",
               {"--plot": "--plot draws times, and --devices does not time; drop {}",
                "--kernels": "--kernels records kernels in this process, and --devices runs worker processes; drop {}"})
    parser._option_string_actions["--quick"].help = quick_help(timed=False)


def run(args, parser) -> int:
    prog = parser.prog
    shapes, scenarios, repeats, configs = read_options(args)
    if args.list:
        print(listing(args, [(shapes, configs)]))
        return ExitCode.OK
    base = baseline(args, parser, "json", "markdown")
    require_gpu()
    import cupy
    try:
        devices = parse_devices(args.devices, cupy.cuda.runtime.getDeviceCount())
    except ValueError as err:
        raise UsageError(str(err)) from None
    started_iso, started, provenance = now_iso(), time.perf_counter(), fingerprint()
    print(f"sweeping {plural(len(shapes), 'shape')} x {plural(len(configs), 'mode')} on "
          f"{'device' if len(devices) == 1 else 'devices'} {', '.join(map(str, devices))}, "
          "one worker process each", file=sys.stderr)
    runs = run_sweep(shapes, configs, devices, scenarios=scenarios, repeats=repeats, seed=args.seed,
                     on_device=lambda run: print(f"device {run.device_id}: "
                                                 f"{run.error or f'done in {run.elapsed_s:.1f} s'}", file=sys.stderr))
    found = agreements(shapes, configs, runs)
    text = render_sweep(runs, found)
    print(text)
    data = sweep_to_json(runs, found, provenance, started_iso, time.perf_counter() - started, __version__,
                         sweep_summary(runs, found), args.seed)
    written = True
    if args.json:
        written &= write_json(args.json, data, prog)
    if args.markdown:
        written &= write_text(args.markdown, f"# cublas_det device sweep\n\n{started_iso}\n\n```\n{text}\n```\n", prog)
    interrupted = any(run.error == INTERRUPTED for run in runs)
    return exit_code(prog, sweep_failed(runs, found), interrupted, print_comparison(args, base, data), written)


build_parser, main = command_main(add_arguments, run)
