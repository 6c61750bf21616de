"""The store: every file's document checked by one validator, and a run written as it was read."""

import json
import math
import pathlib

import pytest

from cublas_det.errors import InputFileError
from cublas_det.report.runfile import bench_result, to_json
from cublas_det.store.run import run_from_dict
from cublas_det.store.schema import check_fields

DATA = pathlib.Path(__file__).parent / "data"


@pytest.mark.parametrize("name", ["h200_run.json", "h200_run_identity.json"])
def test_a_run_of_this_version_read_and_written_again_is_the_same_file(name):
    """Writing is the inverse of reading: a shipped run written by this version, then read and written
    again, is the same file (neither side drops or reshapes a field); times, held in µs and stored in
    seconds, to their last digits."""
    written = _rewritten(json.loads((DATA / name).read_text()), name)
    if name == "h200_run.json":
        # A 0.1 file has no seeds: its checks read back with seed 0 and the entries only timed with
        # none, until the seed its checks now carry is the run's.
        written = _rewritten(json.loads(written), name)
    assert _same(json.loads(_rewritten(json.loads(written), name)), json.loads(written))


def _rewritten(data: dict, name: str) -> str:
    return json.dumps(to_json(bench_result(run_from_dict(data, name))))


def _same(a, b) -> bool:
    """Equal JSON, floats to within their last digits."""
    if isinstance(a, float) and isinstance(b, float):
        return a == b or math.isclose(a, b, rel_tol=1e-12)
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(_same(a[key], b[key]) for key in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def test_the_validator_names_the_field_what_it_must_be_and_what_it_is_in_one_line():
    fields = {"n": "a positive integer", "tags": "a list of strings", "mode": ("PEDANTIC or DEFAULT",
                                                                               lambda v: v in ("PEDANTIC", "DEFAULT"))}
    assert check_fields({"n": 3, "tags": ["a"], "mode": "DEFAULT"}, "f.json: x", fields) == {
        "n": 3, "tags": ["a"], "mode": "DEFAULT"}
    cases = [({"n": 0}, "f.json: x.n: expected a positive integer, found 0; give a good file"),
             ({"n": True}, "f.json: x.n: expected a positive integer, found True; give a good file"),
             ({"n": 1, "tags": ["a", 5]}, "f.json: x.tags[1]: expected a string, found 5; give a good file"),
             ({"n": 1, "mode": "TF32"}, "f.json: x.mode: expected PEDANTIC or DEFAULT, found 'TF32'; give a good file"),
             ({}, "f.json: x.n: missing; expected a positive integer; give a good file"),
             ([1], "f.json: x: expected an object, found a list; give a good file")]
    for record, message in cases:
        with pytest.raises(InputFileError) as raised:
            check_fields(record, "f.json: x", fields, required=("n",), hint="give a good file")
        assert str(raised.value) == message


def test_a_long_value_is_shown_short_and_the_error_is_the_readers_own():
    class LayoutError(InputFileError):
        pass

    with pytest.raises(LayoutError, match=r"f.json: n: expected a string, found -1{36}\.\.\.$"):
        check_fields({"n": -int("1" * 40)}, "f.json:", {"n": "a string"}, error=LayoutError)
    with pytest.raises(InputFileError, match="found a string of 100 characters"):
        check_fields({"n": "x" * 100}, "f.json:", {"n": "an integer"})
