"""The audit of a whole step: under a ``TorchDispatchMode`` (every op, forward and backward), the first op
whose sample-0 bits change from batch 1 to batch B, or whose bits do not repeat at B (docs/lock.md)."""

from __future__ import annotations

import dataclasses

import torch
from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from ..lock.deterministic_ops import repeat_hint
from ..base.integers import is_int
from ..base.words import WIDTH, plural, wrapped
from ..lock.router import OPS, Plan

DIGEST_CHUNK = 1 << 24  # elements digested at once: 128 MiB of int64 per temporary
_INT_OF = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def _bits(t: torch.Tensor) -> torch.Tensor:
    """The tensor's bits as integers of its width (bool as bytes), so that NaNs and -0 compare as bits."""
    t = t.contiguous()
    if t.is_floating_point() or t.dtype == torch.bool:  # a bool is one byte: _INT_OF[1] is uint8
        return t.view(_INT_OF[t.element_size()])
    return t


def _digest(t: torch.Tensor) -> torch.Tensor:
    """Two position-weighted sums over the bits, kept of an output past the memory budget (a chunk at a
    time: no copy of the output is made)."""
    flat = _bits(t).reshape(-1)
    total = torch.zeros(2, dtype=torch.int64, device=t.device)
    for start in range(0, flat.numel(), DIGEST_CHUNK):
        bits = flat[start:start + DIGEST_CHUNK].to(torch.int64)
        position = torch.arange(start, start + bits.numel(), device=t.device, dtype=torch.int64)
        total += torch.stack(((bits * (2 * position + 1)).sum(), (bits ^ (position * 0x9E3779B1)).sum()))
    return total


def _ulp(x: torch.Tensor, y: torch.Tensor) -> int | None:
    """The largest ULP distance between two float tensors of one type (None for other types)."""
    if not x.is_floating_point():
        return None
    bits = 8 * x.element_size()

    def ordered(t):
        i = _bits(t).to(torch.int64)
        magnitude = i & ((1 << (bits - 1)) - 1)
        return torch.where(i < 0, -magnitude, magnitude)

    return int((ordered(x) - ordered(y)).abs().max().item())


@dataclasses.dataclass(frozen=True)
class OpDifference:
    """The first op whose output bits differ."""

    index: int  # its place among the ops compared
    op: str  # aten.cumsum.default
    module: str  # the module it ran in ("" outside any; "(backward)" in the backward pass)
    shape: tuple
    dtype: str
    differing: int  # -1: compared by digest (past the memory budget), the count not known
    elements: int
    max_ulp: int | None

    def __str__(self) -> str:
        where = f" in {self.module}" if self.module else ""
        ulp = f", up to {self.max_ulp:,} ULP" if self.max_ulp is not None else ""
        head = f"{self.op}{where} (op {self.index + 1}): {'x'.join(map(str, self.shape)) or 'scalar'} {self.dtype}"
        if self.differing < 0:
            return f"{head}, its digest differs"
        return f"{head}, {self.differing:,} of {self.elements:,} elements differ{ulp}"


@dataclasses.dataclass(frozen=True)
class AuditPart:
    """One comparison of two runs of the step."""

    what: str  # "batch 1 vs 4, sample 0" or "repeat at batch 4"
    compared: int  # ops whose outputs were compared
    skipped: int  # ops with no output to compare (views, no batch dimension, past the memory budget)
    first: OpDifference | None
    gemms: tuple  # (op, shape, locked or None without a lock, identical)
    note: str = ""  # why the comparison stopped early
    digests: int = 0  # outputs past the memory budget, compared by digest (a difference without its count)
    hint: str = ""  # the PyTorch setting that makes the op named repeat, where it has one

    @property
    def identical(self) -> bool:
        return self.first is None and self.compared > 0 and not self.note

    def lines(self) -> list[str]:
        if not self.compared:
            why = self.note or "the step ran no op with an output to compare"
            return wrapped(f"{self.what}: nothing compared ({why})", WIDTH, "    ")
        head = f"{self.what}: {plural(self.compared, 'op')} compared"
        if self.digests:
            head += f" ({self.digests:,} outputs by digest, past the memory budget)"
        gemms = self.gemms
        gemm_text = f"{plural(len(gemms), 'GEMM call')}, {sum(1 for g in gemms if g[3])} identical"
        if any(g[2] is not None for g in gemms):
            gemm_text += f", {sum(1 for g in gemms if g[2])} locked"
        lines = [f"{head}; {gemm_text}"]
        if self.first is None:
            lines.append("  every op identical" + (f" up to where it stopped: {self.note}" if self.note else ""))
        else:
            lines += ["  " + line for line in wrapped(f"first op that differs: {self.first}", WIDTH - 2, "    ")]
            lines += ["  " + line for line in wrapped(self.hint, WIDTH - 2, "    ") if self.hint]
        unlocked = [g for g in gemms if g[2] is False]
        for op, shape, _, identical in unlocked[:5]:
            lines.append(f"  not locked: {op} {shape}{'' if identical else ' (differs)'}")
        return lines


@dataclasses.dataclass(frozen=True)
class AuditReport:
    batch: AuditPart | None
    repeat: AuditPart | None

    @property
    def clean(self) -> bool:
        """Every part compared something and found no op that differs."""
        parts = [p for p in (self.batch, self.repeat) if p is not None]
        return bool(parts) and all(p.identical for p in parts)

    def lines(self) -> list[str]:
        """Each part's lines; the verdict is the reader's (``clean``; the command's exit code)."""
        return [line for part in (self.batch, self.repeat) if part is not None for line in part.lines()]

    def __str__(self) -> str:
        return "\n".join(self.lines())


class _Modules:
    """The module each op runs in, through the global forward hooks."""

    def __init__(self, model=None):
        self.names = {id(m): name or type(m).__name__ for name, m in model.named_modules()} if model else {}
        self.stack, self.handles = [], []

    def __enter__(self):
        self.handles = [register_module_forward_pre_hook(self._enter), register_module_forward_hook(self._leave)]
        return self

    def _enter(self, module, args):
        self.stack.append(self.names.get(id(module), type(module).__name__))

    def _leave(self, module, args, output):
        if self.stack:
            self.stack.pop()

    def __exit__(self, *exc):
        for handle in self.handles:
            handle.remove()

    def current(self) -> str:
        if self.stack:
            return self.stack[-1]
        task = getattr(torch._C, "_current_graph_task_id", lambda: -1)()
        return "(backward)" if task != -1 else ""


class _Recorder(TorchDispatchMode):
    """Every op's outputs: kept (``reference`` None), or compared with a kept run's."""

    def __init__(self, modules: _Modules, reference=None, batch: int = 0, budget_bytes: int = 0, router=None):
        super().__init__()
        self.modules, self.reference, self.batch = modules, reference, batch
        self.budget, self.router = budget_bytes, router
        self.kept = []  # per op: (name, [tensor or None])
        self.gemms = []
        self.compared = self.skipped = self.digests = 0  # digests: outputs past the memory budget
        self.first, self.note = None, ""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        packet = func.overloadpacket.__name__
        plan = self._plan(packet, args, kwargs) if packet in OPS and self.router is not None else None
        out = func(*args, **kwargs)
        if func.is_view:
            return out
        outputs = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
        if self.reference is None:
            self._keep(str(func), outputs)
        elif not self.note:
            self._compare(str(func), packet, outputs, plan)
        return out

    def _plan(self, packet, args, kwargs):
        if packet in ("mm", "bmm"):
            return self.router.plan(args[0], args[1])
        if packet == "addmm":
            return self.router.plan(args[1], args[2], args[0], kwargs.get("alpha", 1), kwargs.get("beta", 1))
        if kwargs.get("beta", 1) != 0 or kwargs.get("alpha", 1) != 1:  # baddbmm adding to its input: not locked
            return Plan(None, reason="baddbmm that adds to its input")
        return self.router.plan(args[1], args[2])

    def _keep(self, name, outputs):
        kept = []  # per output: (whole, a copy or, past the memory budget, its digest, shape), or None
        for t in outputs:
            if t.is_complex() or t.layout != torch.strided:
                kept.append(None)
                continue
            size = t.numel() * t.element_size()
            try:
                if self.budget >= size:
                    self.budget -= size
                    kept.append((True, t.detach().clone(), tuple(t.shape)))
                else:
                    kept.append((False, _digest(t), tuple(t.shape)))
            except torch.OutOfMemoryError:  # the step's own tensors left no room: this output is not compared
                kept.append(None)
        self.kept.append((name, kept))

    def _slice(self, ours: torch.Tensor, shape: tuple):
        """Sample 0's part of ``ours`` (at batch B) matching ``shape`` (at batch 1), or None; in a repeat, ``ours``
        if the shapes agree."""
        if not self.batch:
            return ours if tuple(ours.shape) == shape else None
        if ours.dim() != len(shape):
            return None
        grown = [d for d in range(ours.dim()) if ours.shape[d] != shape[d]]
        if len(grown) != 1 or ours.shape[grown[0]] != self.batch * shape[grown[0]]:
            return None
        return ours.narrow(grown[0], 0, shape[grown[0]])

    def _compare(self, name, packet, outputs, plan):
        index = self.compared + self.skipped
        if index >= len(self.reference.kept):
            self.note = f"the step ran more ops than the reference run ({name} at op {index + 1})"
            return
        theirs_name, theirs = self.reference.kept[index]
        if theirs_name != name:
            self.note = f"the step ran other ops from op {index + 1} ({name}, where the reference ran {theirs_name})"
            return
        pairs = []
        for ours, item in zip(outputs, theirs):
            if item is not None:
                whole, value, shape = item
                ours = self._slice(ours, shape)
                if ours is not None and (not whole or ours.dtype == value.dtype):
                    pairs.append((ours, whole, value))
        if not pairs:
            self.skipped += 1
            return
        self.compared += 1
        same = True
        for ours, whole, value in pairs:
            if whole:
                a, b = _bits(ours), _bits(value)
                if torch.equal(a, b):
                    continue
                differing, ulp = int((a != b).sum().item()), _ulp(ours, value)
            else:
                self.digests += 1
                if torch.equal(_digest(ours), value):
                    continue
                differing, ulp = -1, None
            same = False
            if self.first is None:
                self.first = OpDifference(index, name, self.modules.current(), tuple(ours.shape),
                                          str(ours.dtype).removeprefix("torch."), differing, ours.numel(), ulp)
            break
        if packet in OPS:
            shape = "x".join(map(str, outputs[0].shape)) if outputs else ""
            self.gemms.append((name, shape, plan.locked if plan is not None else None, same))


def _run(step, n, modules, **options):
    recorder = _Recorder(modules, **options)
    with recorder:
        step(n)
    torch.cuda.synchronize() if torch.cuda.is_available() else None
    return recorder


def audit(step, batch: int = 4, *, repeat: bool = True, model=None, memory_fraction: float = 0.25,
          router=None) -> AuditReport:
    """Run ``step(n)`` (the step on the first ``n`` samples) at batch 1 and at ``batch``, and, with ``repeat``,
    twice at ``batch``; name the first op whose bits differ. The step must leave the state it starts from;
    ``model`` names the modules; outputs are kept up to ``memory_fraction`` of the free device memory, and
    compared by digest past it; ``router``: the enabled lock's, to say whether each GEMM was locked."""
    if not is_int(batch, 2):
        raise ValueError(f"batch must be an int >= 2, not {batch!r}")
    budget = int(torch.cuda.mem_get_info()[0] * memory_fraction) if torch.cuda.is_available() else 8 << 30
    parts = [None, None]
    with _Modules(model) as modules:
        for index, first in enumerate((1, batch) if repeat else (1,)):
            what = f"batch 1 vs {batch}, sample 0" if first == 1 else f"repeat at batch {batch}"
            reference = _run(step, first, modules, budget_bytes=budget)
            again = _run(step, batch, modules, reference=reference, batch=batch if first == 1 else 0, router=router)
            note = again.note
            if not note and len(reference.kept) > again.compared + again.skipped:
                note = f"the step ran fewer ops than the reference run ({again.compared + again.skipped} of " \
                       f"{len(reference.kept)})"
            if not note and not again.compared and again.skipped:  # it ran ops, none with an output to compare
                note = f"{plural(again.skipped, 'op')} ran, " + (f"no output grew {batch}-fold along one dimension: "
                       "does the step take its first n samples?" if first == 1 else "none with an output to compare")
            # A setting makes an op repeat; none makes it keep its bits as the batch grows.
            hint = repeat_hint(again.first.op) if again.first and first != 1 and \
                not torch.are_deterministic_algorithms_enabled() else ""
            parts[index] = AuditPart(what, again.compared, again.skipped, again.first, tuple(again.gemms), note,
                                     again.digests, hint)
            del reference, again
    return AuditReport(*parts)
