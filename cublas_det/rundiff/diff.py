"""Where two runs' bits first differ: steps in ascending order, leaves in recording (else name, or a
given) order, compared by bits (streamed, so memory stays bounded) or by digest. What was not
compared is never called identical; a run that ends early ends the walk."""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import enum
import zipfile
import zlib

from ..bits.digest import DigestAccumulator
from ..bits.streams import BitComparison, Mismatch, lookup_dtype
from ..base.words import listing, percent, plural, table, wrapped
from .layouts import LAYOUTS, DataSource, Leaf, RunLayoutError, TrainingRun

DEFAULT_CHUNK_BYTES = 4 << 20


class LeafStatus(str, enum.Enum):
    EQUAL = "equal"
    DIVERGE = "DIVERGE"
    MISSING_IN_A = "missing in A"
    MISSING_IN_B = "missing in B"
    SHAPE_DIFFERS = "shape differs"
    DTYPE_DIFFERS = "dtype differs"
    ENDED_IN_A = "A ended before it"  # in the last step of a run that ends before the other: not compared
    ENDED_IN_B = "B ended before it"


_ENDED = (LeafStatus.ENDED_IN_A, LeafStatus.ENDED_IN_B)
_ABSENT = (LeafStatus.MISSING_IN_A, LeafStatus.MISSING_IN_B, *_ENDED)


@dataclasses.dataclass(frozen=True)
class LeafDiff:
    """One leaf of one step in both runs."""

    step: int
    leaf: str
    status: LeafStatus
    dtype_a: str | None = None
    dtype_b: str | None = None
    shape_a: tuple[int, ...] | None = None
    shape_b: tuple[int, ...] | None = None
    compared_by: str | None = None  # "bits", "digest", or None when dtype/shape/presence already differ
    stats: Mismatch | None = None  # when compared by bits (A the reference)

    @property
    def equal(self) -> bool:
        return self.status is LeafStatus.EQUAL

    def to_dict(self) -> dict:
        data = {"step": self.step, "leaf": self.leaf, "status": self.status.value,
                "dtype_a": self.dtype_a, "dtype_b": self.dtype_b,
                "shape_a": list(self.shape_a) if self.shape_a is not None else None,
                "shape_b": list(self.shape_b) if self.shape_b is not None else None, "compared_by": self.compared_by}
        if self.stats is not None:
            data.update(self.stats.to_dict())
        return data


@dataclasses.dataclass(frozen=True)
class StepDiff:
    """One step in both runs: its leaves in comparison order."""

    step: int
    leaves: tuple[LeafDiff, ...]

    @property
    def diverged(self) -> tuple[LeafDiff, ...]:
        return tuple(leaf for leaf in self.leaves if not leaf.equal and leaf.status not in _ENDED)

    @property
    def equal(self) -> bool:
        return not self.diverged

    @property
    def compared(self) -> int:
        """Leaves in both runs (compared by bits or digest, or found of another dtype or shape)."""
        return sum(leaf.status not in _ABSENT for leaf in self.leaves)

    @property
    def not_reached(self) -> int:
        """Leaves the run that ends here did not reach."""
        return sum(leaf.status in _ENDED for leaf in self.leaves)

    def to_dict(self) -> dict:
        return {"step": self.step, "equal": self.equal, "leaves": [leaf.to_dict() for leaf in self.leaves]}


@dataclasses.dataclass(frozen=True)
class RunDiff:
    """Two runs compared: the steps compared, those left after the first divergent one, and where the
    walk ended when one run ends before the other or a read failed."""

    run_a: str
    run_b: str
    steps: tuple[StepDiff, ...]
    not_compared: tuple[int, ...] = ()  # steps after the first divergent step (without all_steps), or a read error
    ended: str | None = None  # "A" or "B": the run whose last step comes before the other's
    beyond_end: tuple[int, ...] = ()  # the other run's steps after it, not compared
    skipped: tuple[str, ...] = ()  # files of either run that no layout reads ("A: step_1/notes.txt")
    error: str | None = None  # the read error that stopped the walk

    @property
    def compared_leaves(self) -> int:
        return sum(step.compared for step in self.steps)

    @property
    def nothing_compared(self) -> bool:
        """No leaf was in both runs: nothing can be said of their bits."""
        return self.compared_leaves == 0 and self.error is None

    @property
    def identical(self) -> bool:
        """Every leaf in both runs has the same bits, at least one was compared, and the walk finished."""
        return self.compared_leaves > 0 and self.error is None and all(step.equal for step in self.steps)

    @property
    def first_divergence(self) -> LeafDiff | None:
        """The first leaf that differs; None when no leaf was in both runs: a leaf missing on one side is a
        divergence of runs that share something, and of runs that share nothing, nothing can be said."""
        if self.compared_leaves == 0:
            return None
        return next((step.diverged[0] for step in self.steps if step.diverged), None)

    @property
    def divergent_steps(self) -> tuple[int, ...]:
        return tuple(step.step for step in self.steps if not step.equal) if self.compared_leaves else ()

    def ending(self) -> str | None:
        """``A ends at step 49 (after 3 of 5 leaves there); B goes on to step 100 (51 steps more, not compared)``."""
        if self.ended is None or not self.steps:
            return None
        last, other = self.steps[-1], "B" if self.ended == "A" else "A"
        inside = (f" (after {last.compared} of the {last.compared + last.not_reached} leaves {other} has there)"
                  if last.not_reached else "")
        more = (f"; {other} goes on to step {self.beyond_end[-1]} ({plural(len(self.beyond_end), 'step')} more, not "
                "compared)" if self.beyond_end else "")
        return f"{self.ended} ends at step {last.step}{inside}{more}"

    def verdict(self) -> str:
        """One sentence: the first divergence, ``identical...``, ``nothing compared: ...`` or ``not finished: ...``."""
        first = self.first_divergence
        if first is not None:
            reason = "" if first.status is LeafStatus.DIVERGE else f" ({first.status.value})"
            earlier = [step.step for step in self.steps if step.step < first.step]
            return f"first divergence at step {first.step} in leaf {first.leaf}{reason}; {_earlier_steps(earlier)}"
        if self.error is not None:
            done = [step.step for step in self.steps]
            return f"not finished: {self.error}" + (f"; before it {_earlier_steps(done)}" if done else "")
        if self.nothing_compared:
            skipped = f"; skipped {listing(self.skipped)}" if self.skipped else ""
            leaves = plural(sum(len(step.leaves) for step in self.steps), "leaf")
            ending = f"; {self.ending()}" if self.ended and self.beyond_end else ""
            return (f"nothing compared: no leaf is in both runs ({leaves} in {plural(len(self.steps), 'step')} of one "
                    f"run or the other{ending}){skipped}; diff reads {LAYOUTS}")
        compared = f"{plural(self.compared_leaves, 'leaf')} in {plural(len(self.steps), 'step')}, all bits equal"
        if self.ended:  # the other run's later steps first: exit 0 does not cover them
            return f"identical as far as {self.ended} goes: {self.ending()}; {compared}"
        return f"identical: {compared}"

    def to_dict(self) -> dict:
        first = self.first_divergence
        return {"run_a": self.run_a, "run_b": self.run_b, "identical": self.identical,
                "verdict": self.verdict(), "compared_leaves": self.compared_leaves,
                "nothing_compared": self.nothing_compared,
                "first_divergence": {"step": first.step, "leaf": first.leaf} if first else None,
                "divergent_steps": list(self.divergent_steps), "not_compared": list(self.not_compared),
                "ended": self.ended, "beyond_end": list(self.beyond_end), "skipped": list(self.skipped),
                "error": self.error, "steps": [step.to_dict() for step in self.steps]}


class IncompleteDiff(RunLayoutError):
    """A read failed during the comparison; :attr:`diff` holds the steps compared before it."""

    def __init__(self, message: str, diff: RunDiff):
        super().__init__(message)
        self.diff = diff


class DiffInterrupted(KeyboardInterrupt):
    """Ctrl-C during the comparison; :attr:`diff` holds the steps compared before it."""

    def __init__(self, diff: RunDiff):
        super().__init__("interrupted")
        self.diff = diff


INTERRUPTED = "interrupted (Ctrl-C)"  # RunDiff.error of a walk stopped by the user, not by a read


def diverging(diverged: int, leaves: int) -> str:
    """``2 of 3 leaves diverge``; ``1 of 1 leaf diverges``."""
    return f"{diverged} of {plural(leaves, 'leaf')} diverge{'s' if diverged == 1 else ''}"


def _earlier_steps(steps: list[int]) -> str:
    if not steps:
        return "no step before it"
    if len(steps) == 1:
        return f"all of step {steps[0]} equal"
    if steps == list(range(steps[0], steps[-1] + 1)):
        return f"all of steps {steps[0]}-{steps[-1]} equal"
    if len(steps) <= 4:
        return f"all of steps {', '.join(map(str, steps))} equal"
    return f"all of the {len(steps)} steps before it equal ({steps[0]}-{steps[-1]})"


def diff_runs(run_a: TrainingRun, run_b: TrainingRun, *, order: list[str] | None = None, all_steps: bool = False,
              chunk_bytes: int = DEFAULT_CHUNK_BYTES) -> RunDiff:
    """Compare two runs step by step, stopping after the first divergent step unless ``all_steps``; ``order``: leaf
    names first (then A's order, then B's). Raises :class:`IncompleteDiff` when a leaf cannot be read."""
    if chunk_bytes <= 0 or chunk_bytes % 8:
        raise ValueError(f"chunk size must be a positive multiple of 8 bytes, not {chunk_bytes}")
    steps = sorted(set(run_a.steps) | set(run_b.steps))
    last_a, last_b = max(run_a.steps, default=None), max(run_b.steps, default=None)
    ended, beyond = None, ()
    if None not in (last_a, last_b) and last_a != last_b:
        ended, end = ("A", last_a) if last_a < last_b else ("B", last_b)
        steps, beyond = [step for step in steps if step <= end], tuple(step for step in steps if step > end)
    elif run_a.stopped != run_b.stopped:  # one was stopped while it recorded its last step, which both have
        ended = "A" if run_a.stopped else "B"
    skipped = tuple(f"{side}: {name}" for side, run in (("A", run_a), ("B", run_b)) for name in run.skipped)
    def result(compared, rest=(), error=None):
        return RunDiff(run_a.describe(), run_b.describe(), tuple(compared), tuple(rest), ended, beyond, skipped, error)
    compared = []
    try:
        for position, step in enumerate(steps):
            leaves_a = {leaf.name: leaf for leaf in run_a.steps.get(step, ())}
            leaves_b = {leaf.name: leaf for leaf in run_b.steps.get(step, ())}
            names = dict.fromkeys([*leaves_a, *leaves_b])  # A's order, then B's; the names of `order` first
            names = dict.fromkeys([*(name for name in order or () if name in names), *names])
            error = run_a.unreadable.get(step) or run_b.unreadable.get(step)  # a file of the step, as listed
            if error is None:
                try:
                    leaves = [compare_leaf(step, name, leaves_a.get(name), leaves_b.get(name), chunk_bytes)
                              for name in names]
                except RunLayoutError as err:
                    error = str(err)
            if error is not None:
                raise IncompleteDiff(error, result(compared, steps[position:], f"step {step}: {error}"))
            if ended and step == steps[-1]:  # what the run that ends lacks here was not reached, if the rest is
                other = "B" if ended == "A" else "A"  # part of the other's step (a run stopped mid-write)
                if not any(leaf.status is LeafStatus[f"MISSING_IN_{other}"] for leaf in leaves):
                    leaves = [dataclasses.replace(leaf, status=LeafStatus[f"ENDED_IN_{ended}"])
                              if leaf.status is LeafStatus[f"MISSING_IN_{ended}"] else leaf for leaf in leaves]
            compared.append(StepDiff(step, tuple(leaves)))
            # a step with no leaf in both runs stops nothing: a later one may share some (else nothing is compared)
            if not compared[-1].equal and not all_steps and any(done.compared for done in compared):
                return result(compared, steps[position + 1:])
        return result(compared)
    except KeyboardInterrupt:  # the steps compared so far are still an answer
        rest = steps[len(compared):]
        raise DiffInterrupted(result(compared, rest, f"step {rest[0]}: {INTERRUPTED}" if rest else INTERRUPTED)) \
            from None


def compare_leaf(step: int, name: str, a: Leaf | None, b: Leaf | None,
                 chunk_bytes: int = DEFAULT_CHUNK_BYTES) -> LeafDiff:
    """Compare one leaf of one step: presence, dtype, shape, then bits (or digests)."""
    facts = {"step": step, "leaf": name, "dtype_a": a and a.dtype, "dtype_b": b and b.dtype,
             "shape_a": a and a.shape, "shape_b": b and b.shape}
    if a is None or b is None:
        return LeafDiff(status=LeafStatus.MISSING_IN_A if a is None else LeafStatus.MISSING_IN_B, **facts)
    if a.dtype != b.dtype:
        return LeafDiff(status=LeafStatus.DTYPE_DIFFERS, **facts)
    if a.shape != b.shape:
        return LeafDiff(status=LeafStatus.SHAPE_DIFFERS, **facts)
    if a.source is not None and b.source is not None:
        stats = compare_sources(a.source, b.source, a.dtype, chunk_bytes, a.shape)
        status = LeafStatus.EQUAL if stats.identical else LeafStatus.DIVERGE
        return LeafDiff(status=status, compared_by="bits", stats=stats, **facts)
    same = leaf_digest(a, chunk_bytes) == leaf_digest(b, chunk_bytes)
    return LeafDiff(status=LeafStatus.EQUAL if same else LeafStatus.DIVERGE, compared_by="digest", **facts)


def compare_sources(source_a: DataSource, source_b: DataSource, dtype: str, chunk_bytes: int = DEFAULT_CHUNK_BYTES,
                    shape: tuple[int, ...] | None = None) -> Mismatch:
    """Stream two equally long sources through one :class:`BitComparison` (two reader threads, four chunks at most);
    ``shape``: the leaf's, the location's."""
    bit_dtype = lookup_dtype(dtype)
    chunk = max(bit_dtype.itemsize, chunk_bytes - chunk_bytes % bit_dtype.itemsize)
    comparison = BitComparison(bit_dtype, shape)
    nbytes = source_a.nbytes
    if nbytes == 0:
        return comparison.stats()
    size = min(chunk, nbytes)
    buffers = [(bytearray(size), bytearray(size)), (bytearray(size), bytearray(size))]
    with contextlib.ExitStack() as stack:
        readers = [stack.enter_context(contextlib.closing(source.open(chunk))) for source in (source_a, source_b)]
        pool = stack.enter_context(concurrent.futures.ThreadPoolExecutor(max_workers=2))
        def read(pair: int, position: int):
            return [pool.submit(_read_exactly, reader, buffer, min(chunk, nbytes - position), source)
                    for reader, buffer, source in zip(readers, buffers[pair], (source_a, source_b))]
        pending = read(0, 0)
        for index, position in enumerate(range(0, nbytes, chunk)):
            for future in pending:
                future.result()  # raises the read's RunLayoutError here
            if position + chunk < nbytes:  # read the next pair into the other buffers while this one is compared
                pending = read((index + 1) % 2, position + chunk)
            comparison.update(*buffers[index % 2], min(chunk, nbytes - position))
    return comparison.stats()


def leaf_digest(leaf: Leaf, chunk_bytes: int = DEFAULT_CHUNK_BYTES) -> str:
    """The leaf's recorded digest, or the digest of its bytes (streamed)."""
    if leaf.digest is not None:
        return leaf.digest
    source, accumulator = leaf.source, DigestAccumulator()
    buffer = bytearray(min(chunk_bytes, source.nbytes))
    with contextlib.closing(source.open(chunk_bytes)) as reader:
        for position in range(0, source.nbytes, chunk_bytes):
            count = min(chunk_bytes, source.nbytes - position)
            _read_exactly(reader, buffer, count, source)
            accumulator.update(memoryview(buffer)[:count])
    return accumulator.hexdigest()


def _read_exactly(reader, buffer, count: int, source: DataSource) -> None:
    """Fill ``buffer[:count]`` from ``reader``, short reads retried; RunLayoutError if it ends first."""
    view, got = memoryview(buffer)[:count], 0
    try:
        while got < count and (read := reader.readinto(view[got:])):
            got += read
    except (OSError, zipfile.BadZipFile, zlib.error, EOFError) as err:  # the latter: a damaged .npz member
        raise RunLayoutError(f"{source.describe()}: read failed: {getattr(err, 'strerror', None) or err}") from None
    if got < count:
        raise RunLayoutError(f"{source.describe()}: truncated: ended before the {source.nbytes} bytes "
                             "its dtype and shape need")


TABLE_HEADER = ("leaf", "status", "mismatched", "max ULP", "max |delta|", "worst index", "note")


def leaf_row(leaf: LeafDiff) -> tuple[str, ...]:
    if leaf.equal:
        return (leaf.leaf, leaf.status.value) + ("",) * 5
    if leaf.status is not LeafStatus.DIVERGE:
        note = "not compared" if leaf.status in _ENDED else _presence_note(leaf)
        return (leaf.leaf, leaf.status.value, "", "", "", "", note)
    if leaf.compared_by == "digest":
        return (leaf.leaf, leaf.status.value, "digest differs", "-", "-", "-", "recorded as a digest: no element facts")
    stats = leaf.stats
    mismatched = (f"{stats.mismatched_elements}/{stats.total_elements} "
                  f"({percent(stats.mismatched_elements, stats.total_elements)})")
    dtype = lookup_dtype(leaf.dtype_a)
    max_ulp = "-" if not dtype.is_float else "nan" if stats.nan_mismatches else str(stats.max_ulp)
    delta = "-" if stats.max_abs_diff is None else f"{stats.max_abs_diff:.3g}"
    index = "[" + ", ".join(map(str, stats.index)) + "]"
    notes = [f"A {dtype.format_value(stats.reference_value)}, B {dtype.format_value(stats.actual_value)}"]
    if stats.only_signed_zeros:
        notes.append("signed zero only")
    elif stats.signed_zero_mismatches:
        notes.append(f"{stats.signed_zero_mismatches} signed zero")
    if stats.nan_mismatches:
        finite = f"; others up to {stats.max_ulp} ULP" if stats.max_ulp is not None else ""
        notes.append(f"{stats.nan_mismatches} with NaN{finite}")
    return (leaf.leaf, leaf.status.value, mismatched, max_ulp, delta, index, "; ".join(notes))


def describe_leaf_type(dtype, shape) -> str:
    """``float32[4096, 64]``: a leaf's element type and shape, as reports name them."""
    return f"{dtype}[{', '.join(map(str, shape))}]"


def _presence_note(leaf: LeafDiff) -> str:
    if leaf.status is LeafStatus.MISSING_IN_A:
        return f"only B has it: {describe_leaf_type(leaf.dtype_b, leaf.shape_b)}"
    if leaf.status is LeafStatus.MISSING_IN_B:
        return f"only A has it: {describe_leaf_type(leaf.dtype_a, leaf.shape_a)}"
    return f"A {describe_leaf_type(leaf.dtype_a, leaf.shape_a)}, B {describe_leaf_type(leaf.dtype_b, leaf.shape_b)}"


def _step_groups(steps, verbose: bool) -> list[list[StepDiff]]:
    """The steps in order, each alone, but for runs of equal steps without -v (a run's end said on its own)."""
    groups: list[list[StepDiff]] = []
    for step in steps:
        plain = not verbose and step.equal and not step.not_reached
        if plain and groups and all(done.equal and not done.not_reached for done in groups[-1]):
            groups[-1].append(step)
        else:
            groups.append([step])
    return groups


def _equal_steps(group: list[StepDiff]) -> str:
    """``steps 1-49: all equal, 26 leaves each``: consecutive equal steps in one line."""
    first, last = group[0].step, group[-1].step
    count = "" if last - first + 1 == len(group) else f" ({len(group)} steps)"
    leaves = {step.compared for step in group}
    each = (f"{plural(leaves.pop(), 'leaf')} each" if len(leaves) == 1 else
            plural(sum(step.compared for step in group), "leaf"))
    return f"steps {first}-{last}{count}: all equal, {each}"


def report_lines(diff: RunDiff, *, verbose: bool = False, width: int | None = None) -> list[str]:
    """The report: both runs, the first divergence, a table per step, the verdict (the last paragraph).
    Equal steps in a row are one line unless ``verbose``; sentences wrap to ``width``, tables do not."""
    def prose(text: str) -> list[str]:
        return wrapped(text, width, "    ") if width else [text]
    first = diff.first_divergence
    answer = (f"first divergence: step {first.step}, leaf {first.leaf}" if first else
              f"no divergence as far as {diff.ended} goes: {diff.ending()}" if diff.ended else "no divergence")
    lines = [f"A: {diff.run_a}", f"B: {diff.run_b}", *prose(answer), ""]
    for group in _step_groups(diff.steps, verbose):
        step = group[0]
        if len(group) > 1:  # equal steps in a row: one line, without -v
            lines.append(_equal_steps(group))
            continue
        ended = f"; {diff.ended} ended before the other {step.not_reached}" if step.not_reached else ""
        equal = f"all {plural(step.compared, 'leaf')} equal" if step.compared != 1 else "1 leaf, equal"
        heading = equal + ended if step.equal else diverging(len(step.diverged), len(step.leaves))
        lines.append(f"step {step.step}: {heading}")
        if verbose or not step.equal:
            lines += table([TABLE_HEADER, *(leaf_row(leaf) for leaf in step.leaves)], indent="  ")
    count = len(diff.not_compared)
    if diff.error is not None:
        cause = "Ctrl-C" if diff.error.endswith(INTERRUPTED) else "a read error"
        lines += prose(f"stopped by {cause} in step {diff.not_compared[0]}; {plural(count, 'step')} from it on "
                       "not compared")
    elif count:
        lines += prose(f"stopped after step {diff.steps[-1].step}, the first divergent step; "
                       f"{plural(count, 'later step')} not compared (--all compares them)")
    if len(diff.divergent_steps) > 1:
        lines += prose(f"divergent steps: {', '.join(map(str, diff.divergent_steps))}")
    if diff.ended and not diff.not_compared and first is not None:  # else the answer and the verdict say it
        lines += prose(diff.ending())
    lines += ["", *prose(diff.verdict())]
    return lines
