"""The lock for a program that is not Python, end to end on the GPU: tests/native/trainer.c (cuBLAS called as a
cudarc trainer calls it: dlopen + dlsym, three handles on three streams, cublasGemmEx bf16 COMPUTE_32F,
cublasSgemm_v2 under TF32 and PEDANTIC math, strided batched GEMMs), and the same program linked with
libcublas, through ``capture``, ``prescribe --lock --capture`` and ``run --lock``.

Checks: calls locked and fallen through (from run's report); every output of the dlopen build and the linked
build bit-identical; each forward GEMM's first rows at T = 1, 2, 7 and 4096 equal to the full product's
(T = 8192) locked, and how many differ unlocked; each output equal, bit for bit, to the PyTorch lock's output
for the same GEMM and operands (needs torch). With ``--time N``: the trainer's timed loops, unlocked and locked,
interleaved over ``--rounds`` rounds: median host µs per call and GPU time per call, and their ratios.

    python bench/interposer_lock.py --out DIR [--time 200 --rounds 3] [--lock FILE] [--jax]

With ``--jax``, tests/native/jax_step.py (jit fp32 and bf16 x @ w.T and its grad) the same way: captured,
prescribed, run under its lock, and the rows of its forward at T = 1, 2, 7, 4096 checked as above.

Writes DIR/summary.json. Exit 0 when every check held, 1 when one did not, 2 when a step could not run.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys

import numpy as np

from cublas_det.lock.interposer import compiler

HERE = os.path.dirname(os.path.abspath(__file__))
NATIVE = os.path.join(HERE, os.pardir, "tests", "native")
TRAINER, JAX_STEP = os.path.join(NATIVE, "trainer.c"), os.path.join(NATIVE, "jax_step.py")
CLI = [sys.executable, "-m", "cublas_det"]


def libcublas() -> str:
    from cuda import pathfinder
    return pathfinder.load_nvidia_dynamic_lib("cublas").abs_path


def build(out: str) -> dict:
    """The trainer twice: opening libcublas itself, and linked with it."""
    lib = libcublas()
    made = {"dlopen": os.path.join(out, "trainer"), "linked": os.path.join(out, "trainer_linked")}
    cc = compiler()
    subprocess.run([cc, "-O2", "-o", made["dlopen"], TRAINER, "-ldl"], check=True)
    folder, name = os.path.split(lib)
    subprocess.run([cc, "-O2", "-DLINKED", "-o", made["linked"], TRAINER, "-ldl", f"-L{folder}", f"-l:{name}",
                    f"-Wl,-rpath,{folder}"], check=True)
    return made


def step(command: list, env: dict, log: str, timeout: float | None = None) -> subprocess.CompletedProcess:
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as err:
        out = err.stdout.decode(errors="replace") if isinstance(err.stdout, bytes) else err.stdout or ""
        done = subprocess.CompletedProcess(command, 124, out, f"timed out after {timeout} s")
    with open(log, "a") as file:
        file.write(f"$ {' '.join(command)}\nexit {done.returncode}\n{done.stdout}{done.stderr}\n")
    return done


def read(folder: str, name: str, bf16: bool, shape) -> np.ndarray:
    raw = np.fromfile(os.path.join(folder, f"{name}.bin"), np.uint16 if bf16 else np.uint32)
    return raw.reshape(shape)


def manifest(folder: str) -> list[tuple]:
    with open(os.path.join(folder, "manifest.txt")) as file:
        return [tuple(line.split()) for line in file if line.strip()]


def same_files(a: str, b: str, names) -> list[str]:
    """Names whose files differ between folders ``a`` and ``b``."""
    return [n for n in names if open(os.path.join(a, f"{n}.bin"), "rb").read() != open(os.path.join(b, f"{n}.bin"),
                                                                                        "rb").read()]


def rows_check(folder: str, gemms) -> dict:
    """For each forward GEMM at T: whether its rows equal the full product's first T rows."""
    forwards = [g for g in gemms if g[1] == "forward"]
    result = {}
    for tag in sorted({g[2] for g in forwards}):
        mine = sorted((int(g[5]), g[0]) for g in forwards if g[2] == tag)
        full_t, full_name = mine[-1]
        bf16 = tag == "bf16"
        full = np.fromfile(os.path.join(folder, f"{full_name}.bin"), np.uint16 if bf16 else np.uint32)
        out = full.size // full_t
        full = full.reshape(full_t, out)
        for t, name in mine[:-1]:
            part = read(folder, name, bf16, (t, out))
            result[name] = bool(np.array_equal(part, full[:t]))
    return result


def torch_check(folder: str, gemms, lock: str) -> dict:
    """Each output against the PyTorch lock's output for the same GEMM and operands, bit for bit."""
    import torch

    import cublas_det.torch as cdt

    def load(name, rows_cols, bf16):
        raw = np.fromfile(os.path.join(folder, f"{name}.bin"), np.int16 if bf16 else np.float32)
        t = torch.from_numpy(raw.reshape(rows_cols).copy())
        return (t.view(torch.bfloat16) if bf16 else t).cuda()

    result = {}
    sizes = _sizes(folder, gemms)
    with cdt.lock(lock, report=None) as router:
        for name, kind, tag, first, second, extra in gemms:
            bf16 = tag == "bf16"
            torch.backends.cuda.matmul.allow_tf32 = tag == "tf32"
            a, b = load(first, sizes[first], bf16), load(second, sizes[second], bf16)
            if kind == "forward":
                out = a[:int(extra)] @ b.t()
            elif kind == "dx":
                out = a @ b
            elif kind == "dw":
                out = a.t() @ b
            else:
                batch = int(extra)
                q, k = a.view(batch, -1, a.shape[-1]), b.view(batch, -1, b.shape[-1])
                out = torch.bmm(q, k.transpose(1, 2)).reshape(-1, q.shape[1])
            torch.cuda.synchronize()
            got = out.cpu().view(torch.int16 if bf16 else torch.int32).numpy()
            mine = np.fromfile(os.path.join(folder, f"{name}.bin"), np.int16 if bf16 else np.int32)
            result[name] = bool(np.array_equal(got.reshape(-1), mine))
        torch.backends.cuda.matmul.allow_tf32 = False
    result["_torch_lock_report"] = str(router.last_report) if router.last_report else ""
    return result


def _sizes(folder: str, gemms) -> dict:
    """Each operand's (rows, cols), from the manifest and the files' sizes."""
    sizes = {}  # elements of each operand
    for name, kind, tag, first, second, extra in gemms:
        element = 2 if tag == "bf16" else 4
        for operand in (first, second):
            sizes[operand] = os.path.getsize(os.path.join(folder, f"{operand}.bin")) // element
    # x: T x in, w: out x in, dy: T x out, q, k: (batch L) x d; the widths from the outputs' sizes
    shaped = {}
    for tag in {g[2] for g in gemms}:
        fwd = [g for g in gemms if g[2] == tag and g[1] == "forward"]
        t_full = max(int(g[5]) for g in fwd)
        element = 2 if tag == "bf16" else 4
        y = os.path.getsize(os.path.join(folder, f"{tag}_y{t_full}.bin")) // element
        out = y // t_full
        x = sizes[f"{tag}_x"]
        inner = x // t_full
        shaped[f"{tag}_x"] = (t_full, inner)
        shaped[f"{tag}_w"] = (out, inner)
        shaped[f"{tag}_dy"] = (t_full, out)
        s = os.path.getsize(os.path.join(folder, f"{tag}_s.bin")) // element
        batch = int([g for g in gemms if g[2] == tag and g[1] == "scores"][0][5])
        length = int(round((s / batch) ** 0.5))
        d = sizes[f"{tag}_q"] // (batch * length)
        shaped[f"{tag}_q"] = shaped[f"{tag}_k"] = (batch * length, d)
    return shaped


def timing(trainers: dict, lock: str, calls: int, rounds: int, log: str) -> dict:
    """The trainer's timed loops, unlocked and under run --lock, interleaved (order rotated each round)."""
    samples: dict = {}
    for r in range(rounds):
        arms = [("unlocked", [trainers["dlopen"], "--time", str(calls)]),
                ("locked", CLI + ["run", "--quiet", "--lock", lock, "--", trainers["dlopen"], "--time", str(calls)])]
        for arm, command in (arms if r % 2 == 0 else arms[::-1]):
            done = step(command, dict(os.environ), log)
            for line in done.stdout.splitlines():
                name, host, gpu = line.split()
                samples.setdefault(name, {}).setdefault(arm, []).append((float(host), float(gpu)))
    result = {}
    for name, arms in samples.items():
        med = {arm: (statistics.median(h for h, _ in v), statistics.median(g for _, g in v)) for arm, v in arms.items()}
        if {"locked", "unlocked"} <= med.keys():
            result[name] = {"host_us": med, "host_extra_us": med["locked"][0] - med["unlocked"][0],
                            "time_ratio": med["locked"][1] / med["unlocked"][1], "rounds": len(arms["locked"])}
    return result


def jax_check(out: str, log: str) -> dict:
    """tests/native/jax_step.py plain, then captured, prescribed and run under its lock: its rows and report."""
    env = dict(os.environ, XLA_PYTHON_CLIENT_PREALLOCATE="false")
    folder = os.path.join(out, "jax")
    os.makedirs(folder, exist_ok=True)
    cap, lock = os.path.join(folder, "capture.json"), os.path.join(folder, "lock.json")
    program = [sys.executable, JAX_STEP]
    result: dict = {}
    for name, command in (("plain", program + [os.path.join(folder, "plain")]),
                          ("capture", CLI + ["capture", "--out", cap, "--"] + program + [os.path.join(folder, "c")]),
                          ("prescribe", CLI + ["prescribe", "--lock", lock, "--capture", cap, "--quick"]),
                          ("locked", CLI + ["run", "--lock", lock, "--"] + program + [os.path.join(folder, "locked")])):
        done = step(command, env, log, timeout=90)
        result[f"{name}_exit"] = done.returncode
        if name == "locked":
            result["run_report"] = done.stderr.strip()
        if name == "prescribe":
            result["prescribe_report"] = done.stdout.strip()[:3000]
    for name in ("plain", "locked"):
        try:
            with open(os.path.join(folder, name, "rows.json")) as file:
                result[name] = json.load(file)
        except OSError as err:
            result[name] = f"not written: {err}"
    return result


def save(out: str, summary: dict) -> None:
    with open(os.path.join(out, "summary.json"), "w") as file:
        json.dump(summary, file, indent=1)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="interposer_lock", help="folder for the builds, outputs and summary.json")
    parser.add_argument("--lock", help="a lock to use instead of prescribing one from the capture")
    parser.add_argument("--time", type=int, default=0, metavar="N")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--jax", action="store_true", help="also tests/native/jax_step.py, captured and locked")
    parser.add_argument("--prescribe", nargs=argparse.REMAINDER, default=["--quick"],
                        help="options for prescribe (default: --quick)")
    args = parser.parse_args(argv)
    from cublas_det.core.device import NoGpuError, require_gpu

    try:
        require_gpu()
        if compiler() is None:
            raise NoGpuError("no C compiler (cc, gcc or clang) to build the trainer with; install one")
    except NoGpuError as err:
        print(f"interposer_lock.py: error: {err}", file=sys.stderr)
        return 2
    os.makedirs(args.out, exist_ok=True)
    log = os.path.join(args.out, "steps.log")
    trainers = build(args.out)
    env = dict(os.environ, TRAINER_CUBLAS=libcublas())
    summary: dict = {"checks": {}}
    folders = {name: os.path.join(args.out, name) for name in ("plain", "cap", "locked", "linked")}
    for folder in folders.values():
        os.makedirs(folder, exist_ok=True)
    if step([trainers["dlopen"], folders["plain"]], env, log).returncode:
        print("the trainer failed: see steps.log", file=sys.stderr)
        return 2
    lock = args.lock
    if not lock:
        cap = os.path.join(args.out, "capture.json")
        done = step(CLI + ["capture", "--out", cap, "--", trainers["dlopen"], folders["cap"]], env, log)
        summary["capture_exit"] = done.returncode
        lock = os.path.join(args.out, "lock.json")
        done = step(CLI + ["prescribe", "--lock", lock, "--capture", cap, *args.prescribe], env, log)
        summary["prescribe_exit"] = done.returncode
        if not os.path.exists(lock):
            print("prescribe wrote no lock: see steps.log", file=sys.stderr)
            return 2
    for build_name, folder in (("dlopen", folders["locked"]), ("linked", folders["linked"])):
        done = step(CLI + ["run", "--lock", lock, "--", trainers[build_name], folder], env, log)
        summary[f"run_{build_name}"] = {"exit": done.returncode, "report": done.stderr.strip()}
        fell = re.search(r"(\d[\d,]*) calls? of \d+ GEMMs? fell through", done.stderr)
        summary["checks"][f"0 fell through ({build_name})"] = bool(fell) and fell.group(1) == "0"
    gemms = manifest(folders["plain"])
    names = [g[0] for g in gemms]
    summary["checks"]["dlopen = linked"] = not same_files(folders["locked"], folders["linked"], names)
    summary["plain_vs_locked_differ"] = same_files(folders["plain"], folders["locked"], names)
    summary["rows_locked"] = rows_check(folders["locked"], gemms)
    summary["rows_plain"] = rows_check(folders["plain"], gemms)
    summary["checks"]["rows batch-invariant locked"] = all(summary["rows_locked"].values())
    summary["rows_plain_differ"] = [n for n, same in summary["rows_plain"].items() if not same]
    try:
        summary["torch"] = torch_check(folders["locked"], gemms, lock)
        summary["checks"]["= PyTorch lock"] = all(v for k, v in summary["torch"].items() if not k.startswith("_"))
    except ImportError as err:
        summary["torch"] = f"not run: {err}"
    save(args.out, summary)  # what is known so far, should a later phase run out of time
    if args.time:
        summary["timing"] = timing(trainers, lock, args.time, args.rounds, log)
        save(args.out, summary)
    if args.jax:
        summary["jax"] = jax_check(args.out, log)
        locked = summary["jax"].get("locked")
        summary["checks"]["JAX rows batch-invariant locked"] = isinstance(locked, dict) and all(
            all(found["rows_equal_full"].values()) for found in locked.values())
    save(args.out, summary)
    print(json.dumps(summary, indent=1))
    return 0 if all(summary["checks"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
