"""What one GEMM call ran, as a comparable signature: its kernels, their grids and time; the main kernel's name
and grid say tensor op or SIMT, the tile, and the split of K (the grid's z, when a split-K reduce sums it)."""

from __future__ import annotations

import collections
import dataclasses
import re

from .names import short_name
from .recorder import record_kernels
from .records import KernelRecord

# cublas_det's and CuPy's own kernels (mismatch tracker, timing engine, copies, fills): never a GEMM's.
OWN_PREFIXES = ("cublas_det_", "cupy_")
OWN_NAMES = ("hold_stream", "stamp_clock")  # the timing engine's, as traces recorded before the prefix name them
TILE = re.compile(r"tilesize(\d+x\d+(?:x\d+)?)|_(\d+x\d+)_")
TENSOR_OP_MARKS = ("tensorop", "s1688", "s16816", "h1688", "h16816", "gmma", "hmma", "tf32", "bf16", "f16", "nvjet",
                   "_tst_")
SIMT_MARKS = ("simt", "ffma", "sgemm")


def is_reduce(name: str) -> bool:
    """A kernel that reduces the main kernel's partial results (``splitKreduce_kernel``, ``reduce_1Block_kernel``)."""
    return "reduce" in name.lower()


def is_split_k_reduce(name: str) -> bool:
    """cuBLASLt's reduce of split-K slices, whose count is the main kernel's grid z."""
    return "splitkreduce" in name.lower()


@dataclasses.dataclass(frozen=True)
class KernelLaunch:
    """One kernel of a call: its short name and launch geometry."""
    name: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]

    grid_text = property(lambda self: "x".join(map(str, self.grid)))

    def to_dict(self) -> dict:
        return {"name": self.name, "grid": list(self.grid), "block": list(self.block)}

    @classmethod
    def from_dict(cls, data: dict) -> KernelLaunch:
        return cls(data["name"], tuple(data["grid"]), tuple(data["block"]))


def math_of(name: str) -> str:
    """"tensor op", "SIMT", "GEMV" or "" (unknown), as the kernel's name says."""
    lower = name.lower()
    if "gemv" in lower:
        return "GEMV"
    if any(mark in lower for mark in TENSOR_OP_MARKS) and "f32f32_f32f32" not in lower:
        return "tensor op"
    if any(mark in lower for mark in SIMT_MARKS):
        return "SIMT"
    return ""


def tile_of(name: str) -> str:
    """The CTA tile the kernel's name gives (``64x64``, ``128x128x32``), or ""."""
    found = TILE.search(name + "_")
    return next((group for group in found.groups() if group), "") if found else ""


@dataclasses.dataclass(frozen=True)
class KernelSignature:
    """The kernels of one GEMM call (the most common sequence of ``sequences``) and their time per call."""
    launches: tuple[KernelLaunch, ...]
    calls: int
    kernel_us: float
    variants: int = 1
    sequences: tuple[tuple[tuple[KernelLaunch, ...], int], ...] = ()

    @property
    def main(self) -> KernelLaunch | None:
        return next((k for k in self.launches if not is_reduce(k.name)), self.launches[0] if self.launches else None)

    reduce = property(lambda self: next((k for k in self.launches if is_reduce(k.name)), None))
    split_reduce = property(lambda self: bool(self.reduce and is_split_k_reduce(self.reduce.name)))
    math = property(lambda self: math_of(self.main.name) if self.main else "")
    tile = property(lambda self: tile_of(self.main.name) if self.main else "")

    @property
    def split_k(self) -> int | None:
        """The slices of K a split-K reduce sums: the main kernel's grid z (1 without one; None: z does not say)."""
        if not (self.main and self.split_reduce):
            return 1
        return self.main.grid[2] if self.main.grid[2] > 1 else None

    def brief(self) -> str:
        """A few words for a table cell: ``SIMT 64x64, split-K 64 + reduce``."""
        if not self.main:
            return "no kernel"
        words = " ".join(w for w in (self.math, self.tile) if w) or self.main.name
        if self.split_reduce:
            words += f", split-K {self.split_k} + reduce" if self.split_k else ", split-K + reduce"
        elif self.reduce:
            words += " + reduce"
        elif self.main.grid[2] > 1:
            words += f", grid z {self.main.grid[2]}"
        if len([k for k in self.launches if not is_reduce(k.name)]) > 1:
            words += f", {len(self.launches)} kernels"
        return words + (f" ({self.variants} variants)" if self.variants > 1 else "")

    def describe(self) -> str:
        return _describe(self.launches)

    def to_dict(self) -> dict:
        return {"launches": [k.to_dict() for k in self.launches], "calls": self.calls, "kernel_us": self.kernel_us,
                "variants": self.variants, "sequences": [{"launches": [k.to_dict() for k in launches], "calls": calls}
                                                          for launches, calls in self.sequences],
                "brief": self.brief(), "math": self.math, "tile": self.tile, "split_k": self.split_k}

    @classmethod
    def from_dict(cls, data: dict) -> KernelSignature:
        return cls(tuple(KernelLaunch.from_dict(k) for k in data["launches"]), data["calls"], data["kernel_us"],
                   data.get("variants", 1), tuple((tuple(KernelLaunch.from_dict(k) for k in seen["launches"]),
                                                   seen["calls"]) for seen in data.get("sequences", ())))


def is_own(name: str) -> bool:
    """Whether a kernel is cublas_det's or CuPy's own (the timing engine's, the checker's, a copy)."""
    short = short_name(name)
    return short.startswith(OWN_PREFIXES) or short in OWN_NAMES


def calls_of(records, calls: int | None = None) -> list[list[KernelRecord]]:
    """The records as GEMM calls: ``calls`` equal runs where they divide, else a reduce joins the kernel before."""
    by_stream = collections.defaultdict(list)
    for record in sorted((r for r in records if not is_own(r.name)), key=lambda r: r.start_ns):
        by_stream[record.stream_id].append(record)
    if calls and len(by_stream) == 1:
        (stream_records,) = by_stream.values()
        if len(stream_records) % calls == 0:
            size = len(stream_records) // calls
            return [stream_records[i:i + size] for i in range(0, len(stream_records), size)]
    calls = []
    for stream_records in by_stream.values():
        for record in stream_records:
            if calls and is_reduce(short_name(record.name)) and calls[-1][-1].stream_id == record.stream_id:
                calls[-1].append(record)
            else:
                calls.append([record])
    return calls


def signature_of(records, calls: int | None = None) -> KernelSignature | None:
    """The signature of the GEMM calls in ``records`` (None without one); ``calls``: how many ran (default: found)."""
    grouped = calls_of(records, calls)
    if not grouped:
        return None
    sequences = collections.Counter(tuple(KernelLaunch(short_name(r.name), tuple(r.grid), tuple(r.block)) for r in call)
                                    for call in grouped).most_common()
    busy_ns = sum(r.duration_ns for call in grouped for r in call)
    count = calls or len(grouped)
    return KernelSignature(sequences[0][0], count, busy_ns / 1e3 / count, len(sequences),
                           tuple(sequences) if len(sequences) > 1 else ())


def recorded_signature(run, calls: int | None = None) -> KernelSignature | None:
    return signature_of(record_kernels(run), calls)


def _describe(launches) -> str:
    return " + ".join(f"{k.name} grid {k.grid_text}" for k in launches) or "no kernel"


SAME_KERNELS = "same kernels and grids: the bits changed inside them (reduction order or scheduling)"


def kernel_change(reference: KernelSignature | None, other: KernelSignature | None, same: str = SAME_KERNELS) -> str:
    """Why, in kernel terms, ``other``'s run may give other bits than ``reference``'s (``same``: nothing differs)."""
    if reference is None or other is None:
        return "kernels not recorded"
    if other.variants > 1:
        ran = "; ".join(f"{calls} x {_describe(launches)}" + (" (the reference's)" if launches == reference.launches
                                                              else "") for launches, calls in other.sequences)
        return f"the calls ran {other.variants} different kernel sequences: {ran}"
    if reference.launches == other.launches:
        return same
    ref_main, other_main = reference.main, other.main
    ref_split, other_split = reference.split_reduce, other.split_reduce
    parts = []
    if ref_main.name != other_main.name:
        parts.append(f"the kernel changed from {ref_main.name} to {other_main.name}")
    if ref_split and other_split and reference.split_k != other.split_k and reference.split_k and other.split_k:
        parts.append(f"split-K {reference.split_k} -> {other.split_k}")
    elif ref_main.grid != other_main.grid:
        parts.append(f"grid {ref_main.grid_text} -> {other_main.grid_text}")
    if other_split and not ref_split:
        parts.append(f"a split-K reduce appeared ({other.reduce.name})")
    elif ref_split and not other_split:
        parts.append("the split-K reduce went away")
    elif (reference.reduce and reference.reduce.name) != (other.reduce and other.reduce.name):
        parts.append(f"reduce {reference.reduce.name if reference.reduce else 'none'} -> "
                     f"{other.reduce.name if other.reduce else 'none'}")
    if not parts:
        parts.append(f"{reference.describe()} -> {other.describe()}")
    return "; ".join(parts)
