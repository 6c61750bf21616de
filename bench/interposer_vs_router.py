"""PyTorch's GEMMs locked two ways, side by side: the router (cublas_det.torch, kernels registered on aten's mm
ops) and the interposer (cublas_det/lock/interposer.c, below torch at cuBLAS's C API), against plain torch.

Each arm runs in a fresh process, the arms interleaved and their order rotated every round: a bf16 Linear's
forward ``x @ w.T`` at 64 x 256 -> 384 (host-bound: host µs per call, the median of 5 loops of --calls) and at
4096 x 4096 -> 4096 (GEMM-bound: GPU µs per call by CUDA events), and the bits of both outputs.

    python bench/interposer_vs_router.py [--out DIR] [--rounds 3] [--calls 2000]

Writes DIR/interposer_vs_router.json. Exit 0 when the two locks gave the same bits and locked every call,
1 when not, 2 when it cannot run (no GPU, no torch, no C compiler).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time

CLI = [sys.executable, "-m", "cublas_det"]
SHAPES = ("64x384x256:tn", "4096x4096x4096:tn")  # row-major M x N x K of x @ w.T (cuBLAS op TN)


def arm(name: str, lock: str, calls: int) -> dict:
    """One arm's measurements, in this process."""
    import contextlib

    import torch

    import cublas_det.torch as cdt

    torch.manual_seed(0)
    small = (torch.randn(64, 256, device="cuda", dtype=torch.bfloat16),
             torch.randn(384, 256, device="cuda", dtype=torch.bfloat16))
    big = (torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16),
           torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16))
    scope = cdt.lock(lock, report=None) if name == "router" else contextlib.nullcontext()
    with scope as router:
        outputs = [x @ w.T for x, w in (small, big)]  # the first call of each: plans made, not timed
        torch.cuda.synchronize()
        host = []
        for _ in range(5):
            start = time.perf_counter()
            for _ in range(calls):
                small[0] @ small[1].T
            torch.cuda.synchronize()
            host.append((time.perf_counter() - start) / calls * 1e6)
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        for _ in range(20):
            big[0] @ big[1].T
        end.record()
        torch.cuda.synchronize()
    digests = [hashlib.sha256(out.view(torch.int16).cpu().numpy().tobytes()).hexdigest()[:16] for out in outputs]
    locked = router.last_report.locked_calls if name == "router" else None
    return {"host_us": statistics.median(host), "gemm_us": begin.elapsed_time(end) / 20 * 1e3, "digests": digests,
            "router_locked_calls": locked}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="interposer_vs_router")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--arm", help=argparse.SUPPRESS)  # a child: one arm
    parser.add_argument("--lock", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.arm:
        json.dump(arm(args.arm, args.lock, args.calls), sys.stdout)
        return 0
    from cublas_det.core.device import NoGpuError, require_gpu
    from cublas_det.base.errors import UsageError
    from cublas_det.lock import interposer
    from cublas_det.lock import file as lockfile

    try:
        require_gpu()
        import torch  # noqa: F401
        preload = interposer.build()
    except (NoGpuError, ImportError, UsageError) as err:
        print(f"interposer_vs_router.py: error: {err}", file=sys.stderr)
        return 2
    os.makedirs(args.out, exist_ok=True)
    lock = os.path.join(args.out, "lock.json")
    subprocess.run(CLI + ["prescribe", "--lock", lock, "--shape", *SHAPES, "--dtype", "bf16", "--modes", "default",
                          "--quick"], check=False, capture_output=True)
    table, reports = os.path.join(args.out, "table.txt"), os.path.join(args.out, "reports")
    os.makedirs(reports, exist_ok=True)
    keys = interposer.write_table(lockfile.load(lock), table)
    env = {"plain": dict(os.environ), "router": dict(os.environ),
           "interposer": dict(os.environ, LD_PRELOAD=preload, CUBLAS_DET_LOCK_TABLE=table,
                              CUBLAS_DET_LOCK_REPORT=reports)}
    samples: dict = {name: [] for name in env}
    for r in range(args.rounds):
        names = list(env)[r % 3:] + list(env)[:r % 3]
        for name in names:
            done = subprocess.run([sys.executable, __file__, "--arm", name, "--lock", lock, "--calls", str(args.calls)],
                                  env=env[name], capture_output=True, text=True, check=True)
            samples[name].append(json.loads(done.stdout))
    found, _, _ = interposer.read_reports(reports, keys, lock)
    summary = {name: {"host_us": statistics.median(s["host_us"] for s in runs),
                      "gemm_us": statistics.median(s["gemm_us"] for s in runs), "digests": runs[0]["digests"],
                      "rounds": len(runs)} for name, runs in samples.items()}
    summary["interposer_locked_calls"] = sum(report.locked_calls for report in found)
    summary["interposer_fell_through_calls"] = sum(report.fell_through_calls for report in found)
    summary["router_locked_calls"] = samples["router"][0]["router_locked_calls"]
    for name in ("router", "interposer"):
        summary[f"{name}_minus_plain_host_us"] = summary[name]["host_us"] - summary["plain"]["host_us"]
        summary[f"{name}_gemm_ratio"] = summary[name]["gemm_us"] / summary["plain"]["gemm_us"]
    summary["same_bits"] = summary["router"]["digests"] == summary["interposer"]["digests"]
    with open(os.path.join(args.out, "interposer_vs_router.json"), "w") as file:
        json.dump(summary, file, indent=1)
    print(json.dumps(summary, indent=1))
    return 0 if summary["same_bits"] and not summary["interposer_fell_through_calls"] else 1


if __name__ == "__main__":
    sys.exit(main())
