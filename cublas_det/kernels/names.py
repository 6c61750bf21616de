"""Kernel names as people read them: demangled, then shortened to the identifying name: a plain name less an xmma
``_execute_kernel__5x_cublas`` trailer, a launcher (``cutlass::Kernel2<...>``) as its one template argument, and
return type, namespaces, template arguments and parameters dropped (``splitKreduce_kernel``)."""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import re

LIBRARY_SUFFIX = re.compile(r"(_execute)?_kernel__\w+$")

# Launchers whose first template argument is the kernel's real name.
LAUNCHERS = {"Kernel", "Kernel2", "device_kernel", "kernel", "GemmKernel"}


@functools.cache
def _cxa_demangle():
    """libstdc++'s ``__cxa_demangle``, or None (names then stay mangled)."""
    for candidate in filter(None, ("libstdc++.so.6", ctypes.util.find_library("stdc++"), "libc++.so.1")):
        try:
            function = ctypes.CDLL(candidate).__cxa_demangle
        except (OSError, AttributeError):
            continue
        function.restype = ctypes.c_void_p
        function.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_size_t),
                             ctypes.POINTER(ctypes.c_int)]
        return function
    return None


@functools.lru_cache(maxsize=4096)
def demangle(name: str) -> str:
    """The C++ name of a mangled symbol (``_Z...``); any other name as is."""
    function = _cxa_demangle()
    if not name.startswith("_Z") or function is None:
        return name
    status = ctypes.c_int()
    pointer = function(name.encode(), None, None, ctypes.byref(status))
    if status.value != 0 or not pointer:
        return name
    try:
        return ctypes.string_at(pointer).decode(errors="replace")
    finally:
        ctypes.CDLL(None).free(ctypes.c_void_p(pointer))


def _top_level(text: str):
    """(index, character) of each character outside brackets (``<>``, ``()``), the top-level brackets included."""
    depth = 0
    for i, char in enumerate(text):
        if char in ">)":
            depth -= 1
        if depth == 0:
            yield i, char
        if char in "<(":
            depth += 1


def _split_top(text: str, opening: str) -> tuple[str, str]:
    """``text`` cut at its first top-level ``opening`` bracket: (before, inside the pair)."""
    start = next((i for i, char in _top_level(text) if char == opening), None)
    if start is None:
        return text, ""
    close = next((i for i, char in _top_level(text[start:]) if i and char in ">)"), len(text) - start)
    return text[:start], text[start + 1:start + close]


# Template arguments that are types, not kernel names: a launcher over one of them keeps its own name.
BUILTIN_TYPES = {"int", "long", "float", "double", "bool", "char", "short", "unsigned", "void", "signed", "half",
                 "__half", "__nv_bfloat16", "__nv_fp8_e4m3", "__nv_fp8_e5m2"}


def _cut(text: str, separator: str) -> list[str]:
    """``text`` split at each ``separator`` outside brackets, empty pieces dropped."""
    pieces, start = [], 0
    for i, _ in _top_level(text):
        if i >= start and text.startswith(separator, i):
            pieces.append(text[start:i])
            start = i + len(separator)
    pieces.append(text[start:])
    return [piece for piece in pieces if piece]


def _components(qualified: str) -> list[str]:
    """``ns::inner::name<args>`` -> ``["ns", "inner", "name"]`` (template arguments dropped)."""
    return [_split_top(part, "<")[0] for part in _cut(qualified, "::")]


@functools.lru_cache(maxsize=4096)
def short_name(name: str) -> str:
    """The kernel's identifying name (the module docstring's forms); a bare ``kernel`` keeps its namespace."""
    full = demangle(name)
    if full == name and name.isidentifier():  # a plain (extern "C") name: only the library suffix goes
        return LIBRARY_SUFFIX.sub("", name) or name
    full = full.replace("(anonymous namespace)::", "")  # a namespace in brackets is no call
    callee, _ = _split_top(full, "(")
    tokens = _cut(callee, " ")  # ``std::enable_if<...>::type ns::kernel<...>``: 2 tokens
    function = tokens[-1] if tokens else ""  # the return type, if any, comes first
    components = _components(function)
    if not components:
        return full
    short = components[-1]
    _, templates = _split_top(function[function.rfind(short):], "<") if short in LAUNCHERS else ("", "")
    if templates:
        comma = next((i for i, char in _top_level(templates) if char == ","), len(templates))
        argument = _components(templates[:comma].strip())  # the first template argument
        if argument and argument[-1] not in BUILTIN_TYPES and argument[-1].replace("_", "").isalnum() \
                and not argument[-1].isdigit():
            return argument[-1]
    if short == "kernel" and len(components) > 1:
        return f"{components[-2]}::{short}"
    return short
