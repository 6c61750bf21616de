"""What a capture holds: the distinct GEMMs a program ran as cuBLAS saw them (column-major), its handles,
streams and threads, and what the logs could not tell; past the caps below calls are counted, not kept."""

from __future__ import annotations

import collections
import dataclasses

from ..core.definition import GemmDefinition

MAX_GEMMS = 10_000  # distinct GEMMs kept; calls of further ones are counted in `dropped_calls`
MAX_SITES = 64  # (process, handle, stream, thread) kept per GEMM
MAX_SAMPLES = 5  # malformed lines quoted per log


@dataclasses.dataclass(frozen=True)
class Site:
    """Where calls came from: process, handle (hex; "" for cuBLASLt, whose log names none), stream, thread."""

    process: int | None
    handle: str
    stream: str
    thread: int | None


@dataclasses.dataclass
class GemmStats:
    calls: int = 0
    sites: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    internal: collections.Counter = dataclasses.field(default_factory=collections.Counter)  # lt_algo -> calls


@dataclasses.dataclass
class HandleStats:
    """A cuBLAS handle as its GEMM calls used it."""

    process: int | None
    handle: str
    calls: int = 0
    streams: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    threads: set = dataclasses.field(default_factory=set)
    math_modes: set = dataclasses.field(default_factory=set)
    workspaces: set = dataclasses.field(default_factory=set)  # sizes; None = cuBLAS's own pool
    stream_workspaces: dict = dataclasses.field(default_factory=dict)  # stream -> workspace addresses


@dataclasses.dataclass
class LogStats:
    """What one log gave: bytes, calls read, and what could not be read (calls, or lines outside any)."""

    path: str = ""
    bytes: int = 0
    calls: int = 0
    gemm_calls: int = 0  # GEMM calls read
    malformed: int = 0  # calls unread: a field missing, extra or not a value of its type
    malformed_gemms: int = 0
    unknown_lines: int = 0
    interleaved: int = 0  # calls unread: their lines mixed with another thread's, which cuBLAS does not prevent
    interleaved_gemms: int = 0
    invalid_gemms: int = 0  # GEMM calls read whose arguments no GEMM has (m = 0, lda < m ...): not replayable
    cut: int = 0  # calls unread: the log ends inside them
    stopped_after_exit_s: float | None = None  # capture stopped reading this long after the program ended
    samples: list = dataclasses.field(default_factory=list)

    def bad(self, kind: str, text: bytes | str, gemm: bool = False) -> None:
        """One call (or, for ``unknown line``, one line) unread: ``malformed``, ``invalid`` or ``cut``."""
        field = {"malformed": "malformed", "invalid": "invalid_gemms", "cut": "cut"}.get(kind, "unknown_lines")
        setattr(self, field, getattr(self, field) + 1)
        self.malformed_gemms += gemm and kind == "malformed"
        self.sample(kind, text)

    def sample(self, kind: str, text: bytes | str) -> None:
        if len(self.samples) < MAX_SAMPLES:
            text = text.decode("utf-8", "replace") if isinstance(text, bytes) else text
            self.samples.append(f"{kind}: {text.strip()[:160]}")


class Capture:
    """The GEMMs of one program, aggregated as the parsers feed them."""

    def __init__(self):
        self.gemms: dict[GemmDefinition, GemmStats] = {}
        self.workspace_addresses: set = set()  # (Site, address) of user workspaces, to tell shared from own
        self.internal: collections.Counter = collections.Counter()  # (GemmDefinition.launched(), lt_algo) -> calls
        self.logs: dict[str, LogStats] = {}
        self.dropped_calls = 0  # calls of GEMMs past the first MAX_GEMMS distinct ones
        self.unattributed_calls = 0  # calls of a GEMM from sites past its first MAX_SITES
        self.unreplayed: collections.Counter = collections.Counter()  # GEMM functions not read -> calls
        self.versions: set = set()
        # Filled in by whoever ran or read the logs.
        self.command: list = []
        self.exit_status: int | None = None
        self.notes: list[str] = []
        self.environment: dict = {}  # the program's CUBLAS_WORKSPACE_CONFIG, where known

    def log(self, kind: str) -> LogStats:
        return self.logs.setdefault(kind, LogStats())

    def add_gemm(self, definition: GemmDefinition, site: Site, workspace_address: str | None = None) -> None:
        """One call: counted per GEMM and site only (it runs per logged call); the rest is derived at the end."""
        stats = self.gemms.get(definition)
        if stats is None and len(self.gemms) >= MAX_GEMMS:
            self.dropped_calls += 1
            return
        stats = stats or self.gemms.setdefault(definition, GemmStats())
        stats.calls += 1
        sites = stats.sites
        if site in sites or len(sites) < MAX_SITES:
            sites[site] += 1
        else:
            self.unattributed_calls += 1
        if workspace_address is not None:
            self.workspace_addresses.add((site, workspace_address))

    def handles(self) -> dict[tuple, HandleStats]:
        """The cuBLAS handles, ``(process, handle) -> HandleStats``, from the GEMMs' sites."""
        handles: dict = {}
        for definition, stats in self.gemms.items():
            if definition.is_lt:
                continue
            for site, calls in stats.sites.items():
                key = (site.process, site.handle)
                handle = handles.get(key) or handles.setdefault(key, HandleStats(*key))
                handle.calls += calls
                handle.streams[site.stream] += calls
                handle.threads.add(site.thread)
                handle.math_modes.add(definition.math_mode)
                if not definition.workspace_unknown:  # a size unknown is none of the sizes it might be
                    handle.workspaces.add(definition.workspace_bytes)
        for site, address in self.workspace_addresses:
            handle = handles.get((site.process, site.handle))
            if handle is not None:
                handle.stream_workspaces.setdefault(site.stream, set()).add(address)
        return handles

    def lt_threads(self) -> dict[int, collections.Counter]:
        """cuBLASLt calls: thread -> calls per stream (its log names no handle)."""
        threads: dict = {}
        for definition, stats in self.gemms.items():
            if definition.is_lt:
                for site, calls in stats.sites.items():
                    threads.setdefault(site.thread, collections.Counter())[site.stream] += calls
        return threads

    def add_internal(self, launched: GemmDefinition, lt_algo: tuple) -> None:
        """A cuBLASLt kernel launched inside a cuBLAS call (what it shows of the call: ``launched()``), joined to
        its call in :meth:`joined`."""
        if len(self.internal) < MAX_GEMMS:
            self.internal[(launched, lt_algo)] += 1

    def joined(self) -> int:
        """Attach each internal cuBLASLt record to the cuBLAS GEMMs it fits; return those that found none."""
        by_launch = collections.defaultdict(list)
        for definition, stats in self.gemms.items():
            if not definition.is_lt:
                by_launch[definition.launched()].append(stats)
        unmatched = shared = 0
        for (launched, lt_algo), calls in self.internal.items():
            owners = by_launch.get(launched)
            if not owners:
                unmatched += calls
                continue
            shared += calls * (len(owners) > 1)
            for stats in owners:
                stats.internal[lt_algo] += calls
        self.internal.clear()
        if shared:
            self.notes.append(f"{shared} cuBLASLt kernel launches fit several cuBLAS GEMMs of one shape (other math "
                              "modes or workspaces) and are listed under each: their split-K may be either's")
        return unmatched
