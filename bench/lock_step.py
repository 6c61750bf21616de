"""The lock on a real Mamba2 model (transformers' Mamba2, bf16): what it locks, its bits, its cost.

1. captures the GEMMs of the model's training step (`cublas-det capture`) and writes their lock
   (`cublas-det bench --prescribe --lock --capture`);
2. runs the step plain, locked, and in batch_invariant_ops' mode (given --peer), interleaved, and
   gives the median step time per arm with a 95% interval of its ratio to plain torch (training
   step and forward-only inference);
3. compares the locked logits and gradients with plain torch's, bit for bit, and counts what fell
   through;
4. audits the forward at batch 1 against batch 4 (plain and locked): the first op that differs;
5. times torch.mm against the locked mm on 4096^3 bf16, interleaved (eager, events).

Usage: python bench/lock_step.py [--out DIR] [--peer DIR_WITH_batch_invariant_ops] [--rounds 15]
Needs a GPU, PyTorch and transformers. Exit codes: 0 the figures were printed and written; 2 with
one line without a GPU, PyTorch or transformers, or for a bad argument; a step that fails (the
capture, the lock) ends in its traceback (1).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
STEP_ENV = "LOCK_STEP_PHASE"


VOCAB = 4096


def _blocks(layers: int):
    """The GEMMs of mamba2-130m's layers (in_proj 768 -> 3352, out_proj 1536 -> 768) around cheap
    elementwise work in place of the convolution and the scan: a step whose time is mostly GEMMs."""
    import torch

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = torch.nn.RMSNorm(768)
            self.in_proj = torch.nn.Linear(768, 3352, bias=False)
            self.out_proj = torch.nn.Linear(1536, 768, bias=False)

        def forward(self, x):
            z, xs, _ = self.in_proj(self.norm(x)).split([1536, 1536, 280], dim=-1)
            return x + self.out_proj(xs * torch.nn.functional.silu(z))

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(VOCAB, 768)
            self.layers = torch.nn.ModuleList(Block() for _ in range(layers))
            self.norm = torch.nn.RMSNorm(768)
            self.lm_head = torch.nn.Linear(768, VOCAB, bias=False)

        def forward(self, ids):
            h = self.embed(ids)
            for layer in self.layers:
                h = layer(h)
            return self.lm_head(self.norm(h))

    return Model()


def _model(name: str, batch: int, seqlen: int, layers: int):
    import torch

    torch.manual_seed(0)
    if name == "mamba2":  # transformers' Mamba2 (its PyTorch path), mamba2-130m's widths
        from transformers import Mamba2Config, Mamba2ForCausalLM

        config = Mamba2Config(hidden_size=768, num_hidden_layers=layers, vocab_size=VOCAB, state_size=128,
                              expand=2, head_dim=64, n_groups=1, num_heads=24, chunk_size=256)
        model = Mamba2ForCausalLM(config)
    else:
        model = _blocks(layers)
    model = model.to("cuda", torch.bfloat16)
    ids = torch.randint(0, VOCAB, (batch, seqlen), device="cuda")
    return model, ids


def _logits(model, ids):
    out = model(ids)
    return out.logits if hasattr(out, "logits") else out


def _train_step(model, ids):
    model.zero_grad(set_to_none=True)
    logits = _logits(model, ids)
    logits.float().sum().backward()  # a sum over samples: each sample's gradient is its own
    return logits


def _phase_step() -> None:
    """What `capture` runs: three training steps and three forward passes."""
    import torch

    model, ids = _model(os.environ[STEP_ENV], int(os.environ["LOCK_BATCH"]), int(os.environ["LOCK_SEQLEN"]),
                        int(os.environ["LOCK_LAYERS"]))
    for _ in range(3):
        _train_step(model, ids)
        with torch.no_grad():
            model(ids)
    torch.cuda.synchronize()


def _cli(*args) -> subprocess.CompletedProcess:
    result = subprocess.run([sys.executable, "-m", "cublas_det", *args], capture_output=True, text=True)
    print(result.stdout[-4000:], result.stderr[-3000:], sep="\n", flush=True)
    return result


def _interval(ratios, seed=0):
    import numpy

    ratios = numpy.asarray(ratios)
    draws = numpy.random.default_rng(seed).choice(ratios, (4000, len(ratios)))
    medians = numpy.median(draws, axis=1)
    return float(numpy.median(ratios)), float(numpy.quantile(medians, 0.025)), float(numpy.quantile(medians, 0.975))


def _time_arms(arms: dict, rounds: int, steps: int) -> dict:
    """Per arm, the ms of one step in each round; arms interleaved, their order rotated every round."""
    import torch

    names = list(arms)
    times = {name: [] for name in names}
    for fn in arms.values():  # warm-up: kernels compiled, caches and descriptors made
        fn()
        fn()
    torch.cuda.synchronize()
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(steps):
                arms[name]()
            end.record()
            end.synchronize()
            times[name].append(start.elapsed_time(end) / steps)
    return times


def _graphed(fn):
    """``fn`` captured in a CUDA graph (warmed up on a side stream first, as torch asks): its replay."""
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph.replay  # the bound method keeps its graph alive


def _summary(times: dict, reference: str) -> dict:
    import numpy

    out = {}
    for name, values in times.items():
        ratios = [v / r for v, r in zip(values, times[reference])]
        median, low, high = _interval(ratios)
        out[name] = {"median_ms": float(numpy.median(values)), "ratio": median, "ci_low": low, "ci_high": high}
    return out


def _arms(model, ids, lock, peer, train: bool) -> dict:
    import torch

    from cublas_det.torch import Router

    def plain():
        if train:
            _train_step(model, ids)
        else:
            with torch.no_grad():
                _logits(model, ids)

    router = Router(lock)  # one, as a program enables it once: its descriptors are made on the first step

    def locked():
        router.enable()
        plain()

    def unlocked():
        router.disable()
        plain()

    locked.router = router
    arms = {"torch": unlocked, "locked": locked}
    if peer is not None:
        def peer_mode():
            router.disable()
            with peer.set_batch_invariant_mode(True):
                plain()
        arms["batch_invariant_ops"] = peer_mode
    return arms


def _one_model(name: str, args, peer) -> dict:
    """Capture, lock, bits, time and audit of one model."""
    import torch

    import cublas_det.torch as cdt
    from cublas_det.lock import file as lockfile

    results = {}
    capture, lock_path = os.path.join(args.out, f"capture_{name}.json"), os.path.join(args.out, f"lock_{name}.json")
    env = {**os.environ, STEP_ENV: name, "LOCK_BATCH": str(args.batch), "LOCK_SEQLEN": str(args.seqlen),
           "LOCK_LAYERS": str(args.layers)}
    started = time.time()
    result = subprocess.run([sys.executable, "-m", "cublas_det", "capture", "--out", capture, "--", sys.executable,
                             os.path.abspath(__file__)], env=env, capture_output=True, text=True)
    print(result.stdout[-6000:], result.stderr[-2000:], sep="\n", flush=True)
    results["capture_s"] = time.time() - started
    if os.path.exists(lock_path):
        os.remove(lock_path)
    started = time.time()
    made = _cli("bench", "--prescribe", "--lock", lock_path, "--capture", capture, "--quick")
    results["lock_s"], results["lock_exit"] = time.time() - started, made.returncode
    lock = lockfile.load(lock_path)
    results["lock_entries"] = [{"gemm": str(e.key), "source": e.source, "cost": e.cost} for e in lock.entries.values()]
    ratios = [e.cost["against_heuristic"]["median"] for e in lock.entries.values()
              if e.cost and "against_heuristic" in e.cost]
    results["pinned_vs_heuristic"] = {"min": min(ratios, default=None), "max": max(ratios, default=None),
                                      "n": len(ratios)}

    model, ids = _model(name, args.batch, args.seqlen, args.layers)
    # Bits: locked against plain, training step.
    plain_logits = _train_step(model, ids).detach().clone()
    plain_grads = [p.grad.detach().clone() for p in model.parameters()]
    with cdt.lock(lock, report=None) as router:
        locked_logits = _train_step(model, ids).detach().clone()
        locked_grads = [p.grad.detach().clone() for p in model.parameters()]
    report = router.last_report
    same = lambda a, b: torch.equal(a.view(torch.int16), b.view(torch.int16))  # noqa: E731
    results["train_step"] = {"locked_calls": report.locked_calls, "fell_through_calls": report.fell_through_calls,
                             "fell_through": report.fell_through, "logits_identical": same(plain_logits, locked_logits),
                             "grads_identical": sum(same(a, b) for a, b in zip(plain_grads, locked_grads)),
                             "grads": len(plain_grads),
                             "logits_max_abs_diff": float((plain_logits.float() - locked_logits.float()).abs().max())}
    print(name, "train step under the lock:", report, json.dumps(results["train_step"], default=str)[:800], flush=True)

    # Time: training step and forward-only, interleaved arms; eager, then each arm replayed from a CUDA graph
    # (the host's cost gone: what the GPU pays for the pinned algorithms).
    for step, train in (("train", True), ("inference", False)):
        for graphs in (False, True) if args.graphs else (False,):
            arms = _arms(model, ids, lock, peer, train)
            timed = arms
            if graphs:
                timed = {}
                for arm, fn in arms.items():
                    try:
                        timed[arm] = _graphed(fn)
                    except RuntimeError as err:  # an arm that cannot be captured whole: timed without it
                        results[f"time_{step}_graphs_{arm}"] = f"not captured: {err}"
            times = _time_arms(timed, args.rounds, args.steps)
            arms["locked"].router.close()
            label = f"time_{step}{'_graphs' if graphs else ''}"
            results[label] = _summary(times, "torch")
            print(name, label, json.dumps(results[label], indent=1), flush=True)

    # The audit: forward at batch 1 against batch 4, plain and locked.
    def forward(n):
        with torch.no_grad():
            return _logits(model, ids[:n])

    results["audit_plain"] = str(cdt.audit(forward, args.batch, model=model))
    with cdt.lock(lock, report=None):
        results["audit_locked"] = str(cdt.audit(forward, args.batch, model=model))
    print("audit, plain:\n" + results["audit_plain"] + "\naudit, locked:\n" + results["audit_locked"], flush=True)
    with torch.no_grad():
        one, four = _logits(model, ids[:1]), _logits(model, ids)
    results["sample0_b1_vs_b4_max_abs"] = float((one[0].float() - four[0].float()).abs().max())

    return results


def _host_cost(where: dict, config, calls: int = 5000, rounds: int = 5) -> dict:
    """The host time of a locked call: a GEMM too small to hide it (bf16 64x256 -> 384), in a host-bound loop;
    torch, a Python kernel that only calls torch's own (the floor of any torch.library kernel), and the lock,
    interleaved; medians of ``rounds``, in µs per call."""
    import statistics

    import torch

    import cublas_det.torch as cdt
    from cublas_det.prescribe import lock_entries
    from cublas_det.core.shapes import parse_shape
    from cublas_det.lock import file as lockfile

    entries, _ = lock_entries([parse_shape("64x384x256:tn")], [config],
                              timing={"min_visits": 2, "max_visits": 2, "budget_s": 0.2})
    router = cdt.Router(lockfile.Lock(where, {}, "").merged(entries))
    native, keys = torch.library.get_kernel("aten::mm", "CUDA"), torch._C.DispatchKeySet(torch._C.DispatchKey.CUDA)
    x = torch.randn(64, 256, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(384, 256, device="cuda", dtype=torch.bfloat16)
    host = {"torch": [], "python kernel": [], "locked": []}
    for _ in range(rounds):
        for arm in host:
            floor = torch.library.Library("aten", "IMPL") if arm == "python kernel" else None
            if floor is not None:
                floor.impl("mm", lambda a, b: native.call_boxed(keys, a, b), "CUDA")
            router.enable() if arm == "locked" else router.disable()
            torch.cuda.synchronize()
            started = time.perf_counter()
            for _ in range(calls):
                torch.nn.functional.linear(x, w)
            torch.cuda.synchronize()
            host[arm].append((time.perf_counter() - started) / calls * 1e6)
            if floor is not None:
                floor._destroy()
    router.close()
    medians = {arm: statistics.median(values) for arm, values in host.items()}
    return {"median_us": medians, "locked_minus_torch_us": medians["locked"] - medians["torch"], "rounds": host,
            "locked_calls": router.report().locked_calls}


def main() -> int:
    if os.environ.get(STEP_ENV):
        _phase_step()
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=".", help="folder for capture.json, lock.json, lock_step.json")
    parser.add_argument("--peer", help="a folder holding the batch_invariant_ops package (its Triton matmul)")
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--seqlen", type=int, default=2048)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--steps", type=int, default=3, help="steps per timed round")
    parser.add_argument("--graphs", action="store_true", help="also time each arm replayed from a CUDA graph")
    parser.add_argument("--host-cost-only", action="store_true",
                        help="only the host time of a small locked call against torch's (median of 5 rounds)")
    parser.add_argument("--models", nargs="+", default=["block", "mamba2"], choices=["block", "mamba2"],
                        help="block: mamba2-130m's GEMMs around elementwise work; mamba2: transformers' Mamba2")
    args = parser.parse_args()
    from cublas_det.core.device import NoGpuError, require_gpu

    try:
        require_gpu()
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except (NoGpuError, ImportError) as err:
        print(f"lock_step.py: error: {err}", file=sys.stderr)
        return 2
    import torch

    import cublas_det.torch as cdt
    from cublas_det.lock import file as lockfile

    if args.host_cost_only:
        from cublas_det import GemmConfig, MathMode
        from cublas_det.core.device import fingerprint

        config = GemmConfig(MathMode.DEFAULT, input_dtype="bfloat16", output_dtype="bfloat16")
        host = _host_cost(lockfile.where_here(fingerprint()), config)
        print(json.dumps(host, indent=1))
        with open(os.path.join(args.out, "lock_host_cost.json"), "w") as file:
            json.dump(host, file, indent=1)
        return 0
    peer = None
    if args.peer:
        sys.path.insert(0, args.peer)
        import batch_invariant_ops as peer

    results = {"batch": args.batch, "seqlen": args.seqlen, "layers": args.layers, "tokens": args.batch * args.seqlen}
    for name in args.models:
        results[name] = _one_model(name, args, peer)
    where = lockfile.load(os.path.join(args.out, f"lock_{args.models[0]}.json")).where

    # 4096^3: torch.mm against the locked mm, eager, interleaved.
    from cublas_det import GemmConfig, MathMode
    from cublas_det.prescribe import lock_entries
    from cublas_det.core.shapes import parse_shape

    shape = parse_shape("4096x4096x4096")
    config = GemmConfig(MathMode.DEFAULT, input_dtype="bfloat16", output_dtype="bfloat16")
    entries, refused = lock_entries([shape], [config], timing={"min_visits": 4, "max_visits": 6, "budget_s": 1.0})
    big = lockfile.Lock(where, {}, "").merged(entries)
    results["mm_4096_refused"] = refused
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    router = cdt.Router(big)

    def locked_mm():
        router.enable()
        torch.mm(a, b)

    def plain_mm():
        router.disable()
        torch.mm(a, b)

    times = _time_arms({"torch.mm": plain_mm, "locked": locked_mm}, args.rounds * 2, 50)
    router.close()
    results["mm_4096_locked_calls"] = router.report().locked_calls  # the locked arm did run locked

    results["host_us_per_call_64x384x256"] = _host_cost(where, config)
    print("host us per call:", results["host_us_per_call_64x384x256"], flush=True)
    results["mm_4096"] = _summary(times, "torch.mm")
    results["mm_4096"]["pinned_vs_heuristic_graph"] = entries[0].cost if entries else None
    print("4096^3:", json.dumps(results["mm_4096"], indent=1), flush=True)
    with open(os.path.join(args.out, "lock_step.json"), "w") as file:
        json.dump(results, file, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
