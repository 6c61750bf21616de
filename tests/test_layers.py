"""The package's layers, read from its own imports: entry points -> features -> core, never back up,
and no import inside a function but of the optional or GPU-only packages (so each module's needs are
read at its top, and a cycle cannot hide in a function body)."""

import ast
import functools
import pathlib

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "cublas_det"
# Each part of the package (a top-level module or folder) and its floor: a part imports only parts on
# lower floors, and itself.
FLOORS = {
    "base": 0, "bindings": 0,
    "kernels": 1, "bits": 1,
    "core": 2,
    "results": 3,
    "store": 4,
    "apilog": 5, "rundiff": 5, "check": 5, "timing": 5, "lock": 5,
    "render": 6, "prescribe": 6, "torch": 6,
    "cli": 7,
    "__init__": 8, "__main__": 8, "_site": 8, "bench": 8, "compare": 8, "diff": 8, "report": 8, "capture": 8,
    "trace": 8, "testing": 8, "pytest_plugin": 8,
}
MAX_FLOORS = 9  # a deeper house makes every change travel through more parts
# Imported where they are needed: CuPy (a module must import on a machine without a GPU), and the
# optional packages (CUPTI, matplotlib, PyTorch, NVML, safetensors, ml_dtypes).
LAZY = ("cublas_det.torch", "..torch", "cupy", "cupyx", "cupy_backends", "cuda", "cupti", "matplotlib", "torch", "pynvml", "safetensors",
        "ml_dtypes", "importlib.metadata")


def _modules(package):
    """(path, parts) of each module; a package's ``__main__`` is an entry point, whatever its folder."""
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package).with_suffix("").parts
        yield path, ("__main__", *parts) if parts[-1] == "__main__" else parts


@functools.lru_cache(maxsize=None)
def _tree(path):
    """A module's syntax tree, parsed once for all the checks below."""
    return ast.parse(path.read_text())


def _outermost_functions(node):
    """The functions not inside another function (each walked once, its nested ones with it)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield child
        else:
            yield from _outermost_functions(child)


def _imported_parts(parts, tree):
    """(line, part) of every cublas_det module a file imports, absolute or relative."""
    package = list(parts[:-1])
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - (node.level - 1)] if node.level > 1 else package
                target = base + (node.module.split(".") if node.module else [])
                if target:
                    yield node.lineno, target[0]
                else:  # from . import name: the names are parts
                    yield from ((node.lineno, alias.name) for alias in node.names)
            elif node.module and node.module.split(".")[0] == "cublas_det":
                rest = node.module.split(".")[1:]
                yield from [(node.lineno, rest[0])] if rest else ((node.lineno, a.name) for a in node.names)


def upward_imports(package) -> list[str]:
    """Every import of a part on the same floor or above (a part may import itself)."""
    found = []
    for path, parts in _modules(package):
        here = parts[0]
        for line, there in _imported_parts(parts, _tree(path)):
            if there in FLOORS and there != here and FLOORS[there] >= FLOORS.get(here, -1):
                found.append(f"{path.relative_to(package.parent)}:{line}: {here} (floor {FLOORS.get(here)}) "
                             f"imports {there} (floor {FLOORS[there]})")
    return found


def imports_in_functions(package) -> list[str]:
    """Every import inside a function body of anything but the LAZY packages."""
    found = set()
    for path, _ in _modules(package):
        for function in _outermost_functions(_tree(path)):
            for node in ast.walk(function):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom):
                    names = ["." * node.level + (node.module or "")]
                else:
                    continue
                if not all(name.startswith(LAZY) for name in names):
                    found.add(f"{path.relative_to(package.parent)}:{node.lineno}: {', '.join(names)}")
    return sorted(found)


# The C libraries' ctypes layers (declarations, enums, status texts, thin calls) import nothing of the package:
# they sit under every part, and any part may use them.
PURE = ("bindings",)


def impure_imports(package) -> list[str]:
    """Every import by a PURE part of another part of the package."""
    return [f"{path.relative_to(package.parent)}:{line}: {parts[0]} imports {there}"
            for path, parts in _modules(package) if parts[0] in PURE
            for line, there in _imported_parts(parts, _tree(path)) if there != parts[0]]


def test_the_bindings_import_nothing_of_the_package():
    assert impure_imports(PACKAGE) == []


def test_the_purity_check_catches_a_binding_that_imports_the_package(tmp_path):
    fake = tmp_path / "cublas_det"
    (fake / "bindings").mkdir(parents=True)
    (fake / "bindings" / "cublas.py").write_text("from ctypes import c_int\n\nfrom .cublaslt import X\n"
                                                 "from ..base.errors import CublasDetError\n")
    assert impure_imports(fake) == ["cublas_det/bindings/cublas.py:4: bindings imports base"]


def test_every_part_has_a_floor():
    missing = sorted({parts[0] for _, parts in _modules(PACKAGE)} - set(FLOORS))
    assert not missing, f"give these parts of cublas_det a floor in FLOORS: {missing}"


def test_imports_run_one_way_down():
    assert upward_imports(PACKAGE) == []
    assert len(set(FLOORS.values())) <= MAX_FLOORS


def test_no_import_inside_a_function_but_of_optional_or_gpu_packages():
    assert imports_in_functions(PACKAGE) == []


MAX_FUNCTION_LINES = 60


def long_functions(package) -> list[str]:
    """Every function over MAX_FUNCTION_LINES lines, as ``path:name (lines)``."""
    found = []
    for path, _ in _modules(package):
        for node in ast.walk(_tree(path)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                where = f"{path.relative_to(package).as_posix()}:{node.name}"
                if lines > MAX_FUNCTION_LINES:
                    found.append(f"{where} ({lines})")
    return found


def test_no_function_is_over_60_lines():
    assert long_functions(PACKAGE) == []


def test_the_length_check_catches_a_long_function(tmp_path):
    fake = tmp_path / "cublas_det"
    fake.mkdir()
    (fake / "config.py").write_text("def f():\n" + "    x = 1\n" * 61)
    assert long_functions(fake) == ["config.py:f (62)"]


# Results and their rendering hold what kernels/ recorded as plain data, so they do not depend on it.
PLAIN_DATA = ("results/check.py", "results/timing.py", "render")


def test_results_and_reports_hold_kernels_as_plain_data():
    found = [f"{path.relative_to(PACKAGE.parent)}:{line}" for path, parts in _modules(PACKAGE)
             if str(path.relative_to(PACKAGE)).startswith(PLAIN_DATA)
             for line, there in _imported_parts(parts, _tree(path)) if there == "kernels"]
    assert found == []


def test_the_checks_catch_an_import_that_runs_up_and_one_inside_a_function(tmp_path):
    fake = tmp_path / "cublas_det"
    (fake / "cli").mkdir(parents=True)
    (fake / "core").mkdir()
    (fake / "core" / "config.py").write_text("from ..cli import bench\n\n\ndef f():\n    import json\n    import cupy\n")
    (fake / "cli" / "__init__.py").write_text("from ..core.config import f\n")
    assert upward_imports(fake) == [f"cublas_det/core/config.py:1: core (floor 2) imports cli (floor {FLOORS['cli']})"]
    assert imports_in_functions(fake) == ["cublas_det/core/config.py:5: json"]


# One home each: a GEMM's identity is GemmKey (laid out in memory: GemmKey.laid_out), which a catalogue shape
# (GemmShape) names; cuBLASLt's descriptors, layouts and algorithms are made by one plan type, LtPlan.
GEMM_FIELDS = {"trans_a", "trans_b", "n", "k"}
PLAN_MAKERS = {"matmul_desc_create", "layout_create", "preference_create", "algo_init", "heuristic"}


def gemm_classes(package) -> set[str]:
    """``module.Class`` of every class whose annotated fields include a GEMM's ops and dimensions."""
    found = set()
    for path, parts in _modules(package):
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.ClassDef):
                fields = {item.target.id for item in node.body
                          if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)}
                if GEMM_FIELDS <= fields:
                    found.add(f"{'.'.join(parts)}.{node.name}")
    return found


def plan_makers(package) -> set[str]:
    """``module.function`` of every function that calls one of cuBLASLt's makers of a plan's parts."""
    found = set()
    for path, parts in _modules(package):
        for function in _outermost_functions(_tree(path)):
            for node in ast.walk(function):
                if isinstance(node, ast.Call):
                    name = getattr(node.func, "id", getattr(node.func, "attr", ""))
                    if name in PLAN_MAKERS:
                        found.add(f"{'.'.join(parts)}.{function.name}")
    return found


def test_a_gemm_has_one_key_type_and_one_cublaslt_plan_type():
    assert gemm_classes(PACKAGE) == {"core.key.GemmKey", "core.shapes.GemmShape"}
    assert plan_makers(PACKAGE) == {"core.plan.__init__", "core.plan._heuristic"}  # LtPlan's


def test_the_home_checks_catch_a_second_key_and_a_second_plan(tmp_path):
    fake = tmp_path / "cublas_det"
    fake.mkdir()
    (fake / "router.py").write_text("class Key:\n    trans_a: bool\n    trans_b: bool\n    n: int\n    k: int\n\n\n"
                                    "def plan(handle):\n    return _cublaslt.layout_create(0, 1, 1, 1)\n")
    assert gemm_classes(fake) == {"router.Key"}
    assert plan_makers(fake) == {"router.plan"}


# No module reads another's private names: a name with a leading underscore is its module's own business, so a
# module that needs one gets a public name or method from its owner. A module's own private names (defined,
# assigned or imported in it) and dunder names are fine. Other libraries' private names the package must read:
OTHER_LIBRARIES_PRIVATE = {
    "_c_contiguous": "CuPy's ndarray: the flag .flags.c_contiguous reads, without a Flags object (gemm's hot path)",
    "_shape": "CuPy's ndarray: its shape as a plain tuple (gemm's hot path)",
    "_C": "PyTorch's C extension: its current stream, device and cuBLAS settings",
    "_destroy": "torch.library.Library: the one way to take back the kernels it registered",
    "_option_string_actions": "argparse: the flags a parser has",
    "__cxa_demangle": "libstdc++'s C function, read from its CDLL",
}


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _names_defined(tree) -> set[str]:
    """Every name a module defines, assigns (``x._name = ...`` included), takes as a parameter or imports."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.attr)
        elif isinstance(node, ast.alias):
            names.add(node.asname or node.name.split(".")[0])
        elif isinstance(node, ast.arg):
            names.add(node.arg)
    return names


def private_reads(package) -> list[str]:
    """Every ``x._name`` (``x`` not ``self`` or ``cls``) of a ``_name`` its module does not define, and every
    ``from <a module of the package> import _name``, as ``path:line: what``."""
    found = []
    for path, _ in _modules(package):
        tree = _tree(path)
        own = _names_defined(tree) | set(OTHER_LIBRARIES_PRIVATE)
        where = path.relative_to(package.parent)
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and _private(node.attr) and node.attr not in own and not (
                    isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                found.append(f"{where}:{node.lineno}: {ast.unparse(node)}")
            elif isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("cublas_det")):
                found += [f"{where}:{node.lineno}: from {'.' * node.level}{node.module or ''} import {alias.name}"
                          for alias in node.names if _private(alias.name)]
    return sorted(found)


def test_no_module_reads_another_modules_private_names():
    assert private_reads(PACKAGE) == []


def test_the_private_check_catches_a_read_and_an_import_and_leaves_a_modules_own_names(tmp_path):
    fake = tmp_path / "cublas_det"
    fake.mkdir()
    (fake / "handle.py").write_text("class Handle:\n    def __init__(self):\n        self._ptr = 0\n\n"
                                    "    def close(self):\n        return self._ptr, self.__class__\n\n\n"
                                    "def _made():\n    return Handle()._ptr\n")
    (fake / "call.py").write_text("from .handle import _made\n\n\ndef gemm(handle):\n"
                                  "    return handle._ptr, handle.__dict__, handle.x._c_contiguous\n")
    assert private_reads(fake) == ["cublas_det/call.py:1: from .handle import _made",
                                   "cublas_det/call.py:5: handle._ptr"]


# The top level is the package's face and its entry points; every other module lives in the folder of its part.
TOP_LEVEL = {"__init__", "__main__", "bench", "compare", "diff", "report", "capture", "trace", "testing",
             "pytest_plugin"}


def top_level_modules(package) -> set[str]:
    return {path.stem for path in package.glob("*.py")}


def test_the_top_level_holds_the_public_api_and_the_entry_points_only(tmp_path):
    assert top_level_modules(PACKAGE) == TOP_LEVEL and len(TOP_LEVEL) <= 10
    (tmp_path / "helpers.py").write_text("")
    assert top_level_modules(tmp_path) - TOP_LEVEL == {"helpers"}  # a loose module is seen
