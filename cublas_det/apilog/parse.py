"""Streaming parsers of cuBLAS's API log (``CUBLAS_LOGINFO_DBG``) and cuBLASLt's (``CUBLASLT_LOG_LEVEL``): fed
chunks of any size, an unreadable line counted and quoted, never fatal; a call's text less its pointers and times
keys its already parsed definition."""

from __future__ import annotations

import dataclasses
import functools
import re

from ..core.config import FLAG_NAME, MATH_MODE_NAMES
from ..base.dtypes import ELEMENT_TYPES
from ..core.definition import MAX_INT, GemmDefinition, InvalidGemm
from .model import MAX_SAMPLES, Capture, Site

CHUNK = 1 << 22
MAX_BLOCK = 1 << 20  # bytes of one call's text, far above any real call's
_CACHE_SIZE = 4096  # parsed call texts kept; cleared when full

MATH_MODES = {mode.log: int(mode.value) for mode in (*MATH_MODE_NAMES, FLAG_NAME)}

# Patterns begin with a literal, which re finds at C speed; "^" with re.M would be tried at every byte.
_HEADER = re.compile(rb"I! cuBLAS \(v([\w.]+)\) function (?:\S+ )?(\w+)\([^\n]*\n")
_FIELD = re.compile(rb"^i!  (\w+): type=[^;\n]*; val=([^\n]*)$", re.M)
_CONTEXT = re.compile(rb"i!Process=(\d+); Thread=(\d+); GPU=\d+; Handle=[^;\n]*?(?:0x)?([0-9a-fA-F]+|\(nil\))\);"
                      rb" StreamId=[^;\n]*?(?:0x)?([0-9a-fA-F]+|\(nil\))\)[^;\n]*; MathMode=")
_POINTER_VALUE = re.compile(rb"IN HEX:0x[^)\n]*")  # with the time line, what a repeated call changes
_HEX = re.compile(rb"0x(?:0x)?([0-9a-fA-F]+)")
_ENUM_VALUE = re.compile(rb"\((-?\d+)\)\s*$")
_WORKSPACE = re.compile(rb"workspace: type=[^;\n]*; val=([^\n]*)\ni!  workspaceSizeInBytes: type=[^;\n]*; val=(\d+)")
# Element and compute types of the typed GEMMs (cublas<t>gemm...).
_TYPED = {t.blas[0]: (t.cuda_name, t.blas[1]) for t in ELEMENT_TYPES.values() if t.blas}
_GEMM = re.compile(rf"cublas(?:([{''.join(_TYPED)}])gemm|Gemm)(StridedBatched|Batched)?(Ex)?$")
_STATE = {"cublasSetStream": "stream", "cublasSetWorkspace": "workspace", "cublasDestroy": "destroy",
          "cublasSetMathMode": "math"}
_OTHER_GEMM = "other GEMM"  # a GEMM this parser does not read (cublasGemmGroupedBatchedEx, cublasCgemm3m ...)
_THREAD = re.compile(rb"i!Process=(\d+); Thread=(\d+);")
_RECORD_END = b"i! COMPILED WITH"  # a call's last line (after its context line, which has the math mode)


def base_name(function: str) -> str:
    """``cublasSgemm`` for ``cublasSgemm_v2_64``: the name without its ABI suffixes."""
    return function.removesuffix("_64").removesuffix("_v2")


def _kind(function: bytes):
    """What a call of this name is to the parser: a GEMM's name match, a state call's kind, or None."""
    name = base_name(function.decode())
    return _GEMM.match(name) or _STATE.get(name) or (_OTHER_GEMM if "gemm" in name.lower() else None)


def _hex(text: bytes) -> str:
    """``0x255be240`` for ``255be240``, ``0x0`` for ``(nil)`` or zeros."""
    text = text.lstrip(b"0")
    return "0x" + text.decode().lower() if text and text != b"(nil)" else "0x0"


def _enum_name(value: bytes, prefix: str) -> str:
    """``T`` for ``CUBLAS_OP_T(1)`` and the prefix ``CUBLAS_OP_``."""
    return value.split(b"(", 1)[0].decode().removeprefix(prefix)


@functools.lru_cache(maxsize=_CACHE_SIZE)
def _math_mode(text: bytes) -> int | None:
    """``2`` for ``CUBLAS_PEDANTIC_MATH``, flags OR-ed in (``A|B``, ``A | B``, or a number); None if unknown."""
    total = 0
    for part in text.decode("utf-8", "replace").replace("(", "|").replace(")", "|").split("|"):
        part = part.strip()
        if part.isdigit():
            total |= int(part)
        elif part in MATH_MODES:
            total |= MATH_MODES[part]
        elif part:
            return None
    return total


class _Mixed(ValueError):
    """A call's lines mixed with another's: threads that log at once interleave them line by line."""


def _parameters(header: bytes) -> int:
    """The parameters of a header's prototype: a call's block has a field line for each."""
    inside = header[header.find(b"(") + 1:header.rfind(b")")].strip()
    return inside.count(b",") + 1 if inside else 0


class _Cache(dict):
    def put(self, key, value):
        if len(self) >= _CACHE_SIZE:
            self.clear()
        self[key] = value
        return value

    def parsed(self, key, parse, *args, **kwargs):
        """``parse(*args, **kwargs)`` kept under ``key``, or the InvalidGemm it raised, raised at each repeat."""
        value = self.get(key)
        if value is None:
            try:
                value = self.put(key, parse(*args, **kwargs))
            except InvalidGemm as err:
                value = self.put(key, err)
        if value.__class__ is InvalidGemm:
            raise value
        return value


class _LogParser:
    """Chunks in, whole units out: text up to the last ``SEPARATOR`` goes to ``_text(text, complete)``,
    the rest waits for the next chunk; ``complete`` is False only for the text left at the log's end."""

    SEPARATOR = b"\n"
    LOG = ""  # the log's name in Capture.logs

    def __init__(self, capture: Capture, path: str = ""):
        self.capture = capture
        self.stats = capture.log(self.LOG)
        self.stats.path = path
        self._pending = b""
        self._parsed = _Cache()  # a call's text without pointers (and what else defines it) -> what it says
        self._sites = _Cache()  # where calls came from: context line -> (Site, first line); (thread, stream) -> Site

    def feed(self, data: bytes) -> None:
        self.stats.bytes += len(data)
        buffer = self._pending + data
        if b"\r" in buffer:  # CRLF line ends (a log copied through Windows): read as LF; a CR cut off waits
            buffer = buffer.replace(b"\r\n", b"\n")
        cut = buffer.rfind(self.SEPARATOR)
        if cut < 0:
            self._pending = buffer
            if len(buffer) > MAX_BLOCK:  # no call or line of a real log is this long: read it as it is
                self._pending = b""
                self._text(buffer + b"\n", complete=True)
            return
        self._pending = buffer[cut + 1:]
        self._text(buffer[:cut + 1], complete=True)

    def close(self) -> None:
        """The end of the log: the text left is read, its last call or line kept only if it is whole."""
        text, self._pending = self._pending, b""
        if text.strip():
            self._text(text, complete=False)


class CublasLogParser(_LogParser):
    """cuBLAS's API log, fed in chunks (or whole call records: each begins with its ``I! cuBLAS`` line)."""

    SEPARATOR = b"\nI! cuBLAS "  # the last call may go on in the next chunk
    LOG = "cublas"

    def __init__(self, capture: Capture, path: str = ""):
        super().__init__(capture, path)
        self._workspace: dict = {}  # (process, handle) -> (bytes, address) of its user workspace
        # Once a call that sets a workspace (cublasSetWorkspace, cublasSetStream, cublasDestroy) is unread, no
        # handle's workspace is known (whose call it was is unread too) until a call read sets that handle's again.
        self._workspace_lost, self._workspace_set = False, set()
        self._math: dict = {}  # handle field line -> the text of its last cublasSetMathMode, unread
        self._kinds: dict = {}  # function name -> (_kind(), the parameters of its prototype)
        self._threads: set = set()  # (process, thread) of the context lines: one alone, and nothing interleaves
        self._unsure = (0, 0, [])  # calls of bad shape while one thread was seen: calls, GEMM calls, samples
        # Lines mixed in move from one call to the next, so two calls in a row have a bad shape; one alone lost
        # or gained lines of its own. The last call of a chunk, and one of bad shape there waiting for the next:
        self._previous: tuple | None = None  # (parameters, block) of the previous chunk's last call
        self._waiting: tuple | None = None  # (header, block, gemm, err, kind, before_bad): its next call unseen

    def close(self) -> None:
        super().close()
        self._judge_waiting(next_bad=False)  # the log's last call: none after it to have mixed with
        if self._unsure[0]:  # the whole log came from one thread: nothing interleaved, the calls are malformed
            self._resolve("malformed")

    def _resolve(self, kind: str) -> None:
        """The calls of bad shape held in ``_unsure``: interleaved once a second thread is seen, else malformed."""
        (calls, gemms, samples), self._unsure = self._unsure, (0, 0, [])
        setattr(self.stats, kind, getattr(self.stats, kind) + calls)
        setattr(self.stats, f"{kind}_gemms", getattr(self.stats, f"{kind}_gemms") + gemms)
        for sample in samples if kind == "malformed" else ():
            self.stats.sample("malformed", sample)

    def _text(self, text: bytes, complete: bool) -> None:
        math = self._math
        if len(math) > _CACHE_SIZE:  # bounded, as the caches are
            math.clear()
        headers = list(_HEADER.finditer(text))
        self.stats.calls += len(headers)
        if text.count(b"\n") != text.count(b"\ni!") + text.startswith(b"i!") + len(headers):
            self._unknown_lines(text)
        ends = [header.start() for header in headers[1:]] + [len(text)]
        last = -1 if complete else len(text)  # where a call may be cut: at the end of the log
        def bad_shape(index: int) -> bool:  # the call at ``index`` of this chunk (-1: the previous chunk's last)
            if index < 0:
                return self._previous is not None and _mixed_lines(self._previous[1], self._previous[0])
            return _mixed_lines(text[headers[index].end():ends[index]], self._known(headers[index])[1])
        if headers:
            self._judge_waiting(bad_shape(0))
        kinds = self._kinds
        for index, (header, end) in enumerate(zip(headers, ends)):
            function = header[2]
            known = kinds.get(function)  # inline, as this loop runs once per call: _known() for a function new
            kind, parameters = known if known is not None else self._known(header)
            if kind is None:
                continue
            if kind == "math":  # kept unread: read only where a context line's mode is in a form not known here
                start = header.end()
                math[text[start:text.find(b"\n", start)]] = text[start:end]
                continue
            block = text[header.end():end]
            if end == last and not _whole(block):  # the log ends inside this call
                self.stats.bad("cut", b"the log ends inside this call: " + header.group(0)[:60] + b"...")
                continue
            if kind == _OTHER_GEMM:
                self.capture.unreplayed[base_name(function.decode())] += 1
                continue
            gemm = not isinstance(kind, str)
            try:
                context = self._context(block, parameters)
                if gemm:
                    self._gemm(function, kind, block, context)
                else:
                    self._state(kind, block, context)
            except _Mixed as err:
                if index + 1 == len(headers):  # the next call comes with the next chunk, or never
                    self._waiting = (header, block, gemm, err, kind, bad_shape(index - 1))
                else:
                    self._judge(header, block, gemm, err, kind, bad_shape(index - 1), bad_shape(index + 1))
            except InvalidGemm as err:
                self.stats.bad("invalid", f"{header.group(2).decode()}: {err}")
            except (KeyError, ValueError, IndexError, AttributeError) as err:
                self.stats.bad("malformed", f"{type(err).__name__} {err}: {_quoted(header)} {block[:60]!r}", gemm)
                self._lost(kind)
        if headers:
            self._previous = (self._known(headers[-1])[1], text[headers[-1].end():])

    def _known(self, header) -> tuple:
        """``(kind, the parameters of its prototype)`` of a call's header."""
        function = header[2]
        known = self._kinds.get(function)
        if known is None:  # a function first seen
            known = self._kinds[function] = (_kind(function), _parameters(header[0]))
            self.capture.versions.add(header[1].decode())
        return known

    def _judge(self, header, block: bytes, gemm: bool, err, kind, before_bad: bool, after_bad: bool) -> None:
        """A call of bad shape: malformed when the calls on either side are whole (no line moved between them);
        else lines that may have mixed with another thread's (:meth:`_mixed`)."""
        if before_bad or after_bad:
            self._mixed(header, block, gemm, err)
        else:
            self.stats.bad("malformed", f"{err}: {_quoted(header)}", gemm)
        self._lost(kind)

    def _judge_waiting(self, next_bad: bool) -> None:
        if self._waiting is not None:
            (header, block, gemm, err, kind, before_bad), self._waiting = self._waiting, None
            self._judge(header, block, gemm, err, kind, before_bad, next_bad)

    def _lost(self, kind) -> None:
        if kind in ("workspace", "stream", "destroy"):
            self._workspace_lost, self._workspace_set = True, set()

    def _mixed(self, header, block: bytes, gemm: bool, err: _Mixed) -> None:
        """A call of bad shape: interleaved where another thread logs too; else malformed (told at the end)."""
        self._threads.update((int(process), int(thread)) for process, thread in _THREAD.findall(block))
        calls, gemms, samples = self._unsure
        if len(samples) < MAX_SAMPLES:
            samples.append(f"{err}: {_quoted(header)}")
        self._unsure = (calls + 1, gemms + gemm, samples)
        if len(self._threads) > 1:
            self._resolve("interleaved")

    def _thread(self, thread: tuple) -> None:
        if thread not in self._threads:
            self._threads.add(thread)
            if len(self._threads) == 2 and self._unsure[0]:
                self._resolve("interleaved")

    def _unknown_lines(self, text: bytes) -> None:
        for line in text.split(b"\n"):
            if line and not line.startswith((b"i!", b"I! cuBLAS (v")):
                self.stats.bad("unknown line", line)
            elif line.startswith(b"I! cuBLAS (v") and not _HEADER.match(line + b"\n"):
                self.stats.bad("malformed", line)

    def _context(self, block: bytes, parameters: int) -> tuple:
        """``(Site, math mode text, where the time line starts)`` from the lines that end a call; raises
        _Mixed unless they are one call's alone (a field line per parameter, one time and one context line)."""
        time_at, start = _call_lines(block, parameters)
        end = block.find(b"; MathMode=", start)
        if end < 0:
            raise ValueError("no math mode in the context line")
        key = block[start:end]
        known = self._sites.get(key)
        if known is None or not block.startswith(known[1]):  # a call's first line is its handle's field
            first = block[:block.find(b"\n") + 1]
            if _other_handle(first, key):
                raise _Mixed("the handle field and the context line differ")
            if known is None:
                found = _CONTEXT.match(block, start)
                known = self._sites.put(key, (Site(int(found.group(1)), _hex(found.group(3)), _hex(found.group(4)),
                                                   int(found.group(2))), first))
                self._thread((known[0].process, known[0].thread))
        return known[0], block[end + 11:block.find(b"\n", end)], time_at

    def _state(self, kind: str, block: bytes, context: tuple) -> None:
        site = context[0]
        key = (site.process, site.handle)
        if kind == "workspace":
            found = _WORKSPACE.search(block)
            pointer = _HEX.search(found.group(1))
            self._workspace[key] = (int(found.group(2)), _hex(pointer.group(1)) if pointer else "0x0")
        else:  # cublasSetStream resets a user workspace to cuBLAS's own; cublasDestroy ends the handle
            self._workspace.pop(key, None)
        self._workspace_set.add(key)

    def _gemm(self, function: bytes, gemm, block: bytes, context: tuple) -> None:
        site, math_mode, time_at = context
        key = (site.process, site.handle)
        workspace, address = self._workspace.get(key, (None, None))
        if self._workspace_lost and key not in self._workspace_set:
            workspace, address = "unknown", None
        mode = _math_mode(math_mode)
        if mode is None:
            mode = self._set_mode(block, site)
        fields = block[:time_at]
        key = (function, _POINTER_VALUE.sub(b"", fields), mode, workspace)
        self.capture.add_gemm(self._parsed.parsed(key, self._definition, gemm, fields, mode, workspace), site, address)
        self.stats.gemm_calls += 1  # calls read

    def _set_mode(self, block: bytes, site: Site) -> int | None:
        """The mode the last cublasSetMathMode of this call's handle set, or None (none read)."""
        math = self._math.get(block[:block.find(b"\n")])
        if math is None:
            return None
        try:
            setter, _, time_at = self._context(math, 2)  # cublasSetMathMode(handle, mode)
            if (setter.process, setter.handle) != (site.process, site.handle):  # another process's handle
                return None
            return int(_ENUM_VALUE.search(math, 0, time_at).group(1))
        except (ValueError, AttributeError):  # _Mixed included
            return None

    @staticmethod
    def _definition(gemm, block: bytes, math_mode: int | None, workspace) -> GemmDefinition:
        """``workspace``: the handle's bytes, None (cuBLAS's own), or ``"unknown"``."""
        typed, batched, _ = gemm.groups()
        pairs = _FIELD.findall(block)
        fields = dict(pairs)
        if len(fields) != len(pairs):
            raise ValueError("a field twice: another call's lines")
        a_type, compute = _TYPED.get(typed, (None, None))
        types = tuple(_enum_name(fields[name], "CUDA_") if name in fields or not typed else a_type  # cublasSgemmEx's
                      for name in (b"Atype", b"Btype", b"Ctype"))
        algo = None
        if not typed:
            compute = _enum_name(fields[b"computeType"], "CUBLAS_")
            algo = int(_ENUM_VALUE.search(fields[b"algo"]).group(1))
        strides = (tuple(int(fields[name]) for name in (b"strideA", b"strideB", b"strideC"))
                   if batched == "StridedBatched" else None)
        return GemmDefinition(
            gemm.group(0), *(_enum_name(fields[name], "CUBLAS_OP_") for name in (b"transa", b"transb")),
            *(int(fields[name]) for name in (b"m", b"n", b"k", b"lda", b"ldb", b"ldc")), *types, compute, algo,
            int(fields[b"batchCount"]) if batched else 1, strides, math_mode,
            None if workspace == "unknown" else workspace, workspace_unknown=workspace == "unknown")


def _call_lines(block: bytes, parameters: int) -> tuple[int, int]:
    """Where a call's time and context lines start, after a field line per parameter of its prototype;
    raises _Mixed unless its lines (after its header) are so."""
    time_at = block.find(b"i! Time:")
    start = block.find(b"i!Process=", time_at)
    if time_at < 0 or start < 0 or block.find(b"i!Process=", start + 10) >= 0 \
            or block.find(b"i! Time:", time_at + 8) >= 0:
        raise _Mixed("not one time line and one context line")
    fields = block.count(b"\n", 0, time_at)
    if fields != parameters:
        raise _Mixed(f"{fields} field lines for the {parameters} parameters of its prototype")
    return time_at, start


def _other_handle(first: bytes, context: bytes) -> bool:
    """Whether a call's first line, its handle field, names another handle than its context line."""
    handle_at = context.find(b"Handle=") + 7
    return first.startswith(b"i!  handle:") and first[first.find(b"val=") + 4:-1] != \
        context[handle_at:context.find(b";", handle_at)]


def _mixed_lines(block: bytes, parameters: int) -> bool:
    """Whether a call's lines are not one call's alone: :func:`_call_lines`, or a handle field and context
    line that differ (the lines of two calls, each as many as the other's)."""
    try:
        _, context = _call_lines(block, parameters)
    except _Mixed:
        return True
    return _other_handle(block[:block.find(b"\n") + 1], block[context:block.find(b"\n", context)])


def _quoted(header) -> str:
    return header.group(0).decode("utf-8", "replace").strip()[:60] + "..."


def _whole(block: bytes) -> bool:
    """Whether a call's text at the end of the log is whole: its last line begun, or its context line
    ended (a record without the last line); else the log was cut inside it."""
    last = block[block.rfind(b"\n", 0, len(block) - 1) + 1:]
    return last.startswith(_RECORD_END) or (last.startswith(b"i!Process=") and last.endswith(b"\n"))


_LT_WANTED = re.compile(rb"\]\[cublasLt\]\[(\d+)\]\[(?:(Trace)\]\[(cublasLt\w*Matmul)"
                        rb"|Api\]\[cublasLt\w*MatmulAlgoGetHeuristic)\] ?([^\n]*)")
_LT_PAIR = re.compile(rb"(\w+)=(\[[^\]]*\]|\S+)")
_LT_INNER = re.compile(rb"(\w+)=(\S+)")
_LT_POINTERS = re.compile(rb"=0[xX][0-9a-fA-F]+")  # A=, B=, workSpace=, biasPointer= ... (stream= read first)
_INTERNAL = re.compile(rb"cublasLt[A-Z]{3}Matmul")  # a kernel launched for a cuBLAS call (TST, SSS ...)


def _inner(value: bytes) -> dict:
    return {k.decode(): v.decode() for k, v in _LT_INNER.findall(value.strip(b"[]"))}


class LtLogParser(_LogParser):
    """cuBLASLt's log, fed in chunks: every matmul's Trace line and the heuristic query's preference before it."""

    LOG = "cublaslt"

    def __init__(self, capture: Capture, path: str = ""):
        super().__init__(capture, path)
        self._preference: dict = {}  # thread -> (descriptors, preference) of its last heuristic query

    def _text(self, text: bytes, complete: bool) -> None:
        if not complete and not text.endswith(b"\n"):  # the log ends inside this line (close() gives one line)
            self.stats.calls += b"][cublasLt][" in text
            if _LT_WANTED.search(text):
                self.stats.bad("cut", b"the log ends inside this line: " + text[:100] + b"...")
            return
        ours = text.count(b"][cublasLt][")
        self.stats.calls += ours
        if text.count(b"\n") != ours:
            for line in text.split(b"\n"):
                if line.strip() and b"][cublasLt][" not in line:
                    self.stats.bad("unknown line", line)
        for found in _LT_WANTED.finditer(text):
            thread, trace, function, rest = found.groups()
            try:
                if trace:
                    self._matmul(int(thread), function, rest)
                else:
                    query = _LT_POINTERS.sub(b"=", rest)
                    self._preference[int(thread)] = self._parsed.parsed((b"?", query), self._heuristic, query)
            except InvalidGemm as err:
                self.stats.bad("invalid", f"{function.decode()}: {err}")
            except (KeyError, ValueError, IndexError):
                self.stats.bad("malformed", found.group(0), gemm=bool(trace))

    @staticmethod
    def _heuristic(query: bytes) -> tuple:
        pairs = dict(_LT_PAIR.findall(query))
        return _descriptors(pairs), tuple(sorted(item for item in _inner(pairs.get(b"preference", b"")).items()
                                                 if not item[0].startswith("minBytesAlignment")))

    def _matmul(self, thread: int, function: bytes, rest: bytes) -> None:
        at = rest.rfind(b" stream=")
        stream = rest[at + 8:].split(b" ", 1)[0] if at >= 0 else b"0x0"
        key = (function, _LT_POINTERS.sub(b"=", rest))
        internal, definition, descriptors = self._parsed.parsed(key, self._parse_matmul, function, key[1])
        self.stats.gemm_calls += 1
        if internal:
            self.capture.add_internal(*definition)
            return
        query, preference = self._preference.get(thread, (None, ()))
        if query == descriptors and preference:
            definition = self._parsed.parsed((definition, preference), dataclasses.replace, definition,
                                             preference=preference)
        site = self._sites.get((thread, stream)) or self._sites.put(
            (thread, stream), Site(None, "", _hex(stream.lower().removeprefix(b"0x")), thread))
        self.capture.add_gemm(definition, site)

    @staticmethod
    def _parse_matmul(function: bytes, text: bytes) -> tuple:
        pairs = dict(_LT_PAIR.findall(text))
        a, b, c, d = (_inner(pairs[name]) for name in (b"Adesc", b"Bdesc", b"Cdesc", b"Ddesc"))
        compute = _inner(pairs[b"computeDesc"])
        transa, transb = (compute.get(name, "OP_N").removeprefix("OP_") for name in ("transa", "transb"))
        _check_layouts(a, b, c, d, transa, transb)
        batch = int(d.get("batchCount", 1))
        k = int(a["rows"] if transa != "N" else a["cols"])
        common = GemmDefinition(
            "cublasLtMatmul", transa, transb, int(d["rows"]), int(d["cols"]), k, int(a["ld"]), int(b["ld"]),
            int(d["ld"]), a["type"], b["type"], d["type"], compute["computeType"], batch_count=batch,
            strides=tuple(int(x.get("stridedBatchOffset", 0)) for x in (a, b, d)) if batch > 1 else None)
        lt_algo = tuple(sorted(_inner(pairs.get(b"algo", b"")).items()))
        if _INTERNAL.fullmatch(function):
            return True, (common.launched(), lt_algo), None
        definition = dataclasses.replace(
            common, workspace_bytes=int(pairs.get(b"workSpaceSizeInBytes", b"0")),
            scale_type=compute.get("scaleType"), epilogue=compute.get("epilogue"),
            bias="biasPointer" in compute or "BIAS" in compute.get("epilogue", ""),
            sm_count_target=int(compute["smCountTarget"]) if "smCountTarget" in compute else None, lt_algo=lt_algo)
        return False, definition, _descriptors(pairs)


def _check_layouts(a: dict, b: dict, c: dict, d: dict, transa: str, transb: str) -> None:
    """InvalidGemm unless the four layouts are those of one GEMM: ``op(A)`` m x k, ``op(B)`` k x n, C and D m x n."""
    for name, layout in zip("ABCD", (a, b, c, d)):
        for field in ("rows", "cols", "ld", "batchCount"):
            if field in layout and not 1 <= int(layout[field]) <= MAX_INT:
                raise InvalidGemm(f"{name} {field} = {layout[field]}: out of bounds (1 to 2**63 - 1)")
    ((m, k), (k_b, n)) = (((int(x["rows"]), int(x["cols"]))[::1 if op == "N" else -1])
                          for x, op in ((a, transa), (b, transb)))
    shapes = {(int(x["rows"]), int(x["cols"])) for x in (c, d)} | {(m, n)}
    if k != k_b or len(shapes) > 1:
        raise InvalidGemm(f"layouts of no one GEMM: op(A) {m} x {k}, op(B) {k_b} x {n}, C {c['rows']} x {c['cols']}, "
                          f"D {d['rows']} x {d['cols']}")


def _descriptors(pairs: dict) -> tuple:
    """The layouts and compute descriptor of a query or a call (pointers taken out), to pair them."""
    return tuple(pairs.get(name) for name in (b"Adesc", b"Bdesc", b"Cdesc", b"Ddesc", b"computeDesc"))


def parse_stream(parser, stream, chunk: int = CHUNK) -> None:
    """Feed ``parser`` from a binary file object until its end."""
    for data in iter(lambda: stream.read(chunk), b""):
        parser.feed(data)
    parser.close()
