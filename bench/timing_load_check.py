"""Does the benchmark notice another process on the GPU? A quiet run, then one with a load started mid-run.

    python bench/timing_load_check.py [--preset trunk mamba2-130m] [--after 3] [--out DIR]

Runs ``python -m cublas_det.bench --preset ... --scenarios none --json DIR/quiet.json`` (timing
only) on a quiet GPU, then the same again (DIR/loaded.json), starting a second process once the
bench's timing has made --after visits (turns over every shape): a loop of 8192x8192 fp32 cupy
matmuls until the bench ends.
Prints what each run printed as warnings (the report's Warnings section and cublas_det's notes on
stderr) and what its JSON recorded of other processes.

Exit codes: 0 the quiet run printed no timing warning (clock, busy GPU, A/A, noise) and the loaded
run printed at least one; 1 otherwise; 2 no GPU or a bad argument. Takes about twice the bench's
timing time (some 20 s a run for the default presets) plus the load's start.
"""

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import threading
import time

from cublas_det.cli.common import ArgumentParser, prog_name, run_guarded
from cublas_det.core.device import require_gpu
from cublas_det.base.words import plural

ROOT = pathlib.Path(__file__).resolve().parent.parent
# The warnings about timing, as the report words them (cublas_det/render/timing_text.py and text.py).
TIMING_WARNINGS = ("another process used the GPU", "SM clock below", "ratios not trusted", "noisy timing",
                   "clock slowdowns", "blocking kernel let go")
LOAD = r"""
import sys, time
import cupy, numpy
rng = numpy.random.default_rng(0)  # on the host: cupy.random needs cuRAND, which the extras leave out
a = cupy.asarray(rng.standard_normal((8192, 8192), dtype=numpy.float32))
b = cupy.asarray(rng.standard_normal((8192, 8192), dtype=numpy.float32))
print("load: running", flush=True)
end = time.perf_counter() + float(sys.argv[1])
while time.perf_counter() < end:
    for _ in range(4):
        c = a @ b
    cupy.cuda.get_current_stream().synchronize()
"""


def printed_warnings(stdout: str, stderr: str) -> list[str]:
    """The lines of the report's Warnings section, and cublas_det's notes on stderr."""
    lines, inside = [], False
    for line in stdout.splitlines():
        if line == "Warnings":
            inside = True
        elif inside and line.startswith("  "):
            lines.append(line.strip())
        elif inside:
            inside = False
    return lines + [line for line in stderr.splitlines() if line.startswith("cublas_det: note:")]


def timing_warnings(lines: list[str]) -> list[str]:
    return [line for line in lines if any(pattern in line for pattern in TIMING_WARNINGS)]


VISIT_DONE = "timing: visit "  # the bench's progress line after each turn of visits over the shapes


def run_bench(command: list[str], after: int | None, load_seconds: float, log: pathlib.Path) -> dict:
    """Run the bench; with ``after``, start the load once its timing has made that many visits. Its outputs
    and timings."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    started = time.perf_counter()
    bench = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stderr_lines, timed = [], threading.Event()

    def read_stderr():
        for line in bench.stderr:
            stderr_lines.append(line)
            if after is not None and sum(VISIT_DONE in x for x in stderr_lines) >= after:
                timed.set()

    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    load, load_started = None, None
    if after is not None:
        while not timed.wait(0.1):
            if bench.poll() is not None:
                break
        if bench.poll() is None:
            load = subprocess.Popen([sys.executable, "-c", LOAD, str(load_seconds)], env=env,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            load_started = time.perf_counter() - started
    stdout = bench.stdout.read()
    bench.wait()
    reader.join()
    load_output = ""
    if load is not None:
        if load.poll() is None:
            load.terminate()
        load_output = load.communicate()[0]
    stderr = "".join(stderr_lines)
    log.with_suffix(".stdout").write_text(stdout)
    log.with_suffix(".stderr").write_text(stderr + (f"\n--- load process ---\n{load_output}" if load else ""))
    return {"stdout": stdout, "stderr": stderr, "code": bench.returncode, "wall_s": time.perf_counter() - started,
            "load_started_s": load_started, "load_output": load_output}


def main() -> int:
    parser = ArgumentParser(prog=prog_name(), description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", nargs="+", default=["trunk", "mamba2-130m"])
    parser.add_argument("--after", type=int, default=3,
                        help="start the load after the timing's first this many visits (default: %(default)s)")
    parser.add_argument("--load-seconds", type=float, default=120.0, help="the load's longest run (default: %(default)s)")
    parser.add_argument("--out", help="directory for the JSON files and logs (default: a temporary one)")
    args = parser.parse_args()
    require_gpu()  # one line and exit 2 without a GPU
    out = pathlib.Path(args.out or tempfile.mkdtemp(prefix="timing_load_check_"))
    out.mkdir(parents=True, exist_ok=True)
    found = {}
    for name, after in (("quiet", None), ("loaded", args.after)):
        command = [sys.executable, "-m", "cublas_det.bench", "--preset", *args.preset, "--scenarios", "none",
                   "--json", str(out / f"{name}.json")]
        result = run_bench(command, after, args.load_seconds, out / name)
        printed = printed_warnings(result["stdout"], result["stderr"])
        found[name] = timing_warnings(printed)
        load = (f"; a second process ran fp32 matmuls from {result['load_started_s']:.1f} s on"
                if result["load_started_s"] is not None else "")
        print(f"{name} run ({' '.join(command[1:])}): exit {result['code']}, {result['wall_s']:.1f} s{load}")
        print("  warnings printed:" + ("" if printed else " none"))
        print("\n".join(f"    {line}" for line in printed))
        try:
            data = json.loads((out / f"{name}.json").read_text())
            state = data["machine_info"].get("gpu_state") or {}
            during = state.get("during") or {}
            print(f"  json: gpu_state.during.other_processes = {during.get('other_processes')}, "
                  f"A/A = {[t['noise_floor'] for t in data['cublas_det']['timing'].values()]}")
        except (OSError, ValueError, KeyError) as err:
            print(f"  json: could not be read ({type(err).__name__}: {err}); stderr tail: {result['stderr'][-500:]}")
    ok = not found["quiet"] and bool(found["loaded"])
    print(f"{'ok' if ok else 'FAIL'}: quiet run {plural(len(found['quiet']), 'timing warning')}, loaded run "
          f"{len(found['loaded'])}; files in {out}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(run_guarded(prog_name(), main))
