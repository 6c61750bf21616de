"""Acceptance run of ``cublas_det.diff`` on a GPU: a cuBLAS handle shared by 4 streams races; one per stream does not.

    python bench/diff_training_loop.py [--tokens 1048576] [--width 64] [--microbatches 4] [--streams 4]
                                       [--steps 8] [--mode pedantic] [--out DIR]

A small CuPy training loop: three linear layers (tanh between them), a mean-squared-error loss,
plain SGD. Each step runs forward and the input-gradient chain on one stream, then issues the
weight-gradient (dW) GEMMs of every micro-batch and layer -- ``--microbatches`` x 3 of them, each
``width x width x tokens/microbatches`` (split-K shapes: 64x64x262144 by default) -- round-robin
on ``--streams`` concurrent streams, and sums the micro-batch dWs in a fixed order.

The loop runs four times, each recorded with :class:`cublas_det.trace.Recorder`:

* ``shared-a``, ``shared-b``: the dW GEMMs through ONE handle whose stream is switched with
  ``handle.set_stream(s)`` before each call (the hazard cuBLAS documents: the streams share the
  handle's workspace);
* ``per-stream-a``, ``per-stream-b``: one handle per stream (the documented remedy).

Leaves per step, in recording order: activations and input gradients (digests), each micro-batch's
dW (``dW3/mb0`` ...), the summed dWs and the updated weights (bytes, so the diff reports ULPs).
Then it diffs ``shared-a`` with ``shared-b`` and ``per-stream-a`` with ``per-stream-b`` and prints
both reports. Exit 0 when the shared pair diverges and the per-stream pair is identical, 1
otherwise, 2 with one line when no GPU is usable. A race need not show in every step or every run:
raise ``--steps`` (or ``--tokens``) if the shared pair comes out identical.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

from cublas_det.cli.common import ArgumentParser, prog_name, run_guarded
from cublas_det.core.device import device_properties, require_gpu
from cublas_det.base.words import plural
from cublas_det.rundiff.diff import diff_runs, report_lines
from cublas_det.rundiff.layouts import open_run

LAYERS = (1, 2, 3)


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(prog=prog_name(), description=__doc__.split("\n\n")[0],
                            formatter_class=argparse.RawDescriptionHelpFormatter,
                            epilog="example: python bench/diff_training_loop.py --steps 12 --out /tmp/runs")
    parser.add_argument("--tokens", type=int, default=1 << 20, help="tokens per step, T (default: %(default)s)")
    parser.add_argument("--width", type=int, default=64, help="width of every layer (default: %(default)s)")
    parser.add_argument("--microbatches", type=int, default=4,
                        help="micro-batches per step; each dW GEMM is width x width x T/microbatches "
                             "(default: %(default)s)")
    parser.add_argument("--streams", type=int, default=4,
                        help="concurrent streams for the dW GEMMs (default: %(default)s)")
    parser.add_argument("--steps", type=int, default=8, help="training steps per run (default: %(default)s)")
    parser.add_argument("--layout", default="nn", choices=("nn", "nt"),
                        help="dW as input^T @ grad read in place (nt), or as an NN GEMM over a transposed copy of "
                             "the input, the layout of the planted shared-handle check (default: %(default)s)")
    parser.add_argument("--mode", default="pedantic", choices=("pedantic", "default", "tf32"),
                        help="cuBLAS math mode of every handle (default: %(default)s)")
    parser.add_argument("--lr", type=float, default=0.5, help="SGD learning rate (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="data and initial weights (default: %(default)s)")
    parser.add_argument("--record", default="mixed", choices=("mixed", "digest", "full"),
                        help="mixed: digests of activations, bytes of dWs and weights (default: %(default)s)")
    parser.add_argument("--out", metavar="DIR",
                        help="keep the four runs here (default: a temporary directory, removed)")
    return parser


class Model:
    """Three D x D layers on T tokens: buffers made once, a step issues GEMMs and elementwise kernels."""

    def __init__(self, args, shared: bool):
        import cupy
        import numpy as np

        from cublas_det import create_handle

        tokens, width = args.tokens, args.width
        if tokens % args.microbatches:
            raise ValueError(f"--tokens {tokens} is not a multiple of --microbatches {args.microbatches}")
        rng = np.random.default_rng(args.seed)  # on the host: the same data in every run, whatever the GPU
        self.args = args
        self.main = cupy.cuda.Stream(non_blocking=True)
        self.streams = [cupy.cuda.Stream(non_blocking=True) for _ in range(args.streams)]
        self.shared = shared
        with self.main:
            self.x0 = cupy.asarray(rng.standard_normal((tokens, width), dtype=np.float32))
            self.target = cupy.asarray(rng.standard_normal((tokens, width), dtype=np.float32))
            scale = np.float32(1.0 / np.sqrt(width))  # a float32 scalar: a float64 one would promote the weights
            self.w = {layer: cupy.asarray(rng.standard_normal((width, width), dtype=np.float32) * scale)
                      for layer in LAYERS}
            empty = lambda: cupy.empty((tokens, width), cupy.float32)  # noqa: E731
            self.z1, self.h1, self.z2, self.h2, self.y = empty(), empty(), empty(), empty(), empty()
            self.dy, self.dh2, self.dz2, self.dh1, self.dz1 = empty(), empty(), empty(), empty(), empty()
            self.dw_parts = {(layer, mb): cupy.empty((width, width), cupy.float32)
                             for layer in LAYERS for mb in range(args.microbatches)}
            self.dw = {layer: cupy.empty((width, width), cupy.float32) for layer in LAYERS}
            self.loss = cupy.empty((), cupy.float32)
        self.main.synchronize()
        self.main_handle = create_handle(args.mode, stream=self.main)
        if shared:
            one = create_handle(args.mode)  # cuBLAS's default workspace, shared by every stream it is set to
            self.handles = [one] * args.streams
        else:
            self.handles = [create_handle(args.mode, stream=stream) for stream in self.streams]

    def close(self) -> None:
        for handle in {id(h): h for h in self.handles + [self.main_handle]}.values():
            handle.close()

    def step(self) -> list[tuple[str, object, str]]:
        """One SGD step; returns the leaves to record: (name, array, "digest" or "full")."""
        import cupy

        from cublas_det import gemm

        args, main = self.args, self.main
        with main:
            gemm(self.x0, self.w[1], out=self.z1, handle=self.main_handle)
            cupy.tanh(self.z1, out=self.h1)
            gemm(self.h1, self.w[2], out=self.z2, handle=self.main_handle)
            cupy.tanh(self.z2, out=self.h2)
            gemm(self.h2, self.w[3], out=self.y, handle=self.main_handle)
            cupy.subtract(self.y, self.target, out=self.dy)
            cupy.multiply(self.dy, 1.0 / args.tokens, out=self.dy)  # d(0.5 * sum sq / T)/dy
            cupy.sum(cupy.square(self.y - self.target), out=self.loss)
            gemm(self.dy, self.w[3], out=self.dh2, handle=self.main_handle, trans_b=True)
            cupy.multiply(self.dh2, 1.0 - self.h2 * self.h2, out=self.dz2)
            gemm(self.dz2, self.w[2], out=self.dh1, handle=self.main_handle, trans_b=True)
            cupy.multiply(self.dh1, 1.0 - self.h1 * self.h1, out=self.dz1)
            ready = main.record()
        # dW of layer l, micro-batch m: input(l)[rows m]^T @ grad(l)[rows m], round-robin on the streams
        inputs = {1: self.x0, 2: self.h1, 3: self.h2}
        grads = {1: self.dz1, 2: self.dz2, 3: self.dy}
        rows = args.tokens // args.microbatches
        for stream in self.streams:
            stream.wait_event(ready)
        issued = 0
        for mb in range(args.microbatches):
            part = slice(mb * rows, (mb + 1) * rows)
            for layer in (3, 2, 1):  # backward order
                slot = issued % len(self.streams)
                handle = self.handles[slot]
                if self.shared:
                    handle.set_stream(self.streams[slot])
                if args.layout == "nn":  # the copy is made on the GEMM's stream, so it is ready in order
                    with self.streams[slot]:
                        transposed = cupy.ascontiguousarray(inputs[layer][part].T)
                    gemm(transposed, grads[layer][part], out=self.dw_parts[layer, mb], handle=handle)
                else:
                    gemm(inputs[layer][part], grads[layer][part], out=self.dw_parts[layer, mb], handle=handle,
                         trans_a=True)
                issued += 1
        for stream in self.streams:
            main.wait_event(stream.record())
        with main:
            for layer in LAYERS:  # a fixed order of summation
                cupy.copyto(self.dw[layer], self.dw_parts[layer, 0])
                for mb in range(1, args.microbatches):
                    self.dw[layer] += self.dw_parts[layer, mb]
                self.w[layer] -= args.lr * self.dw[layer]
        activations = [("h1", self.h1), ("h2", self.h2), ("y", self.y), ("loss", self.loss),
                       ("dz2", self.dz2), ("dz1", self.dz1)]
        leaves = [(name, array, "digest") for name, array in activations]
        leaves += [(f"dW{layer}/mb{mb}", self.dw_parts[layer, mb], "full")
                   for mb in range(args.microbatches) for layer in (3, 2, 1)]
        leaves += [(f"dW{layer}", self.dw[layer], "full") for layer in (3, 2, 1)]
        leaves += [(f"W{layer}", self.w[layer], "full") for layer in LAYERS]
        return leaves


def train(directory: str, args, shared: bool) -> float:
    """Run the loop with the recorder into ``directory``; return the loss of the last step."""
    from cublas_det.trace import Recorder

    model = Model(args, shared)
    try:
        with Recorder(directory, mode="full" if args.record == "full" else "digest") as recorder, model.main:
            for step in range(1, args.steps + 1):
                for name, array, mode in model.step():
                    recorder.record(step, name, array, mode=None if args.record != "mixed" else mode)
        model.main.synchronize()
        return float(model.loss.get())
    finally:
        model.close()


def main() -> int:
    args = build_parser().parse_args()
    require_gpu()  # one line and exit 2 without a GPU, before the first CUDA call
    root = args.out or tempfile.mkdtemp(prefix="cublas_det_diff_loop_")
    rows = args.tokens // args.microbatches
    print(f"{device_properties()['name']}: 3 layers of {args.width}, T = {args.tokens}, {args.microbatches} "
          f"micro-batches -> {3 * args.microbatches} dW GEMMs of {args.width}x{args.width}x{rows} per step on "
          f"{plural(args.streams, 'stream')}, {args.mode} math, {plural(args.steps, 'step')}; runs in {root}")
    try:
        runs = {}
        for label, shared in (("shared", True), ("per-stream", False)):
            for copy in ("a", "b"):
                directory = os.path.join(root, f"{label}-{copy}")
                start = time.perf_counter()
                loss = train(directory, args, shared)
                print(f"  {label}-{copy}: {time.perf_counter() - start:.1f} s, final loss {loss:.6g}")
                runs[label, copy] = directory
        verdicts = {}
        for label, title in (("shared", "ONE handle shared by the streams"), ("per-stream", "one handle per stream")):
            a, b = runs[label, "a"], runs[label, "b"]
            diff = diff_runs(open_run(a), open_run(b))
            print(f"\n=== {title}: python -m cublas_det.diff {a} {b}")
            print("\n".join(report_lines(diff)))
            verdicts[label] = diff
        raced, clean = not verdicts["shared"].identical, verdicts["per-stream"].identical
        print(f"\nshared handle: {verdicts['shared'].verdict()}")
        print(f"handle per stream: {verdicts['per-stream'].verdict()}")
        if raced and clean:
            print("as expected: the shared handle diverged, a handle per stream did not")
            return 0
        if not raced:
            print("the shared handle did not diverge in these steps: try more --steps or a larger --tokens")
        if not clean:
            print("a handle per stream diverged: not expected (see the report above)")
        return 1
    finally:
        if args.out is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(run_guarded(prog_name(), main))
