"""The one test of an integer: an int that is not a bool, within bounds; no module writes its own."""

import ast
import pathlib

import pytest

from cublas_det.core.config import GemmConfig
from cublas_det.base.integers import is_int
from cublas_det.core.shapes import GemmShape, preset

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "cublas_det"


def test_an_int_within_its_bounds_and_never_a_bool():
    assert is_int(0) and is_int(-5) and is_int(1 << 70) and is_int(3, 3, 3)
    assert not any(is_int(v) for v in (True, False, 1.0, "1", None))
    assert not is_int(True, 0, 1) and not is_int(1, 2) and not is_int(8, 0, 7) and is_int(7, 0, 7)


@pytest.mark.parametrize("make, message", [
    (lambda: GemmShape("x", True, 1, 1), "GemmShape M must be a positive int, not True"),
    (lambda: preset("mamba2-130m", tokens=True), "tokens (T = batch x seqlen) must be a positive int, not True"),
    (lambda: GemmConfig(algo=True), "GemmConfig: algo must be a cublasGemmAlgo_t int, not True"),
    (lambda: GemmConfig(workspace_bytes=-1), "GemmConfig: workspace_bytes must be an int >= 0 or None, not -1"),
])
def test_the_checks_that_read_it_keep_their_words(make, message):
    with pytest.raises(ValueError) as err:
        make()
    assert str(err.value) == message


def _writes_its_own(tree) -> list[int]:
    """Lines of an ``or``/``and`` that asks of one name both ``isinstance(_, bool)`` and ``isinstance(_, int)``."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.BoolOp):
            asked: dict[str, set] = {}
            for call in ast.walk(node):
                if (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "isinstance"
                        and len(call.args) == 2):
                    kinds = call.args[1].elts if isinstance(call.args[1], ast.Tuple) else [call.args[1]]
                    asked.setdefault(ast.dump(call.args[0]), set()).update(
                        k.id for k in kinds if isinstance(k, ast.Name))
            if any({"bool", "int"} <= kinds for kinds in asked.values()):
                found.append(node.lineno)
    return found


def test_no_module_but_integers_writes_the_check():
    found = [f"{path.relative_to(PACKAGE)}:{line}" for path in sorted(PACKAGE.rglob("*.py"))
             if path.name != "integers.py" for line in _writes_its_own(ast.parse(path.read_text()))]
    assert found == [], f"use cublas_det.base.integers.is_int: {found}"
    assert _writes_its_own(ast.parse("ok = isinstance(v, int) and not isinstance(v, bool)")) == [1]


@pytest.mark.parametrize("low", [0, 1, 2])
def test_it_accepts_what_each_written_out_check_accepted(low):
    """The GPU-side checks (handle, check, torch) were ``isinstance(v, bool) or not isinstance(v, int) or
    v < low``; the one test refuses exactly what they refused."""
    for value in (True, False, -1, 0, 1, 2, 3, 1 << 63, 2.0, "2", None):
        old_refused = isinstance(value, bool) or not isinstance(value, int) or value < low
        assert (not is_int(value, low)) == old_refused, value
