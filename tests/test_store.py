"""The store: every file's document checked by one validator, and a run written as it was read."""

import dataclasses
import json
import math
import pathlib

import pytest

from cublas_det.base.errors import InputFileError
from cublas_det.check.stored import bench_result
from cublas_det.store.run import run_from_dict
from cublas_det.base.schema import Each, Record, check

from .conftest import bench_json

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


def test_an_entry_is_labelled_as_this_version_names_it():
    run = run_from_dict(json.loads((DATA / "h200_run_identity.json").read_text()), "run.json")
    assert run.entries and all(entry.label == entry.name for entry in run.entries)


def _rewritten(data: dict, name: str) -> str:
    return json.dumps(bench_json(bench_result(run_from_dict(data, name))))


def _same(a, b) -> bool:
    """Equal JSON, floats to within their last digits."""
    if isinstance(a, float) and isinstance(b, float):
        return a == b or math.isclose(a, b, rel_tol=1e-12)
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(_same(a[key], b[key]) for key in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def test_the_validator_names_the_field_by_its_path_what_it_must_be_and_what_it_is_in_one_line():
    mode = ("PEDANTIC or DEFAULT", lambda v: v in ("PEDANTIC", "DEFAULT"))
    item = Record({"id": "a string"}, required=("id",))
    pair = Each("an integer", whole=("[low, high], low <= high", lambda v: len(v) == 2 and v[0] <= v[1]))
    record = Record({"n": "a positive integer", "tags": "a list of strings", "mode": mode,
                     "gpu": Record({"name": "a string"}, null=False), "items": Each(item),
                     "by_name": Each(Each(item), dict), "pair": pair}, required=("n",))
    good = {"n": 3, "tags": ["a"], "mode": "DEFAULT", "gpu": {"name": "H200"}, "items": [{"id": "g1"}],
            "by_name": {"x": [{"id": "g2"}]}}
    assert check(good, "f.json: x", record) is good
    cases = [({"n": 0}, "x.n: expected a positive integer, found 0"),
             ({"n": True}, "x.n: expected a positive integer, found True"),
             ({"n": 1, "tags": ["a", 5]}, "x.tags[1]: expected a string, found 5"),
             ({"n": 1, "mode": "TF32"}, "x.mode: expected PEDANTIC or DEFAULT, found 'TF32'"),
             ({}, "x.n: missing; expected a positive integer"),
             ([1], "x: expected an object, found a list"),
             ({"n": 1, "gpu": {"name": None}}, "x.gpu.name: expected a string, found null"),
             ({"n": 1, "gpu": []}, "x.gpu: expected an object, found a list"),
             ({"n": 1, "items": [{"id": "a"}, {}]}, "x.items[1].id: missing; expected a string"),
             ({"n": 1, "items": {}}, "x.items: expected a list of objects, found an object"),
             ({"n": 1, "by_name": {"x": [{"id": 5}]}}, "x.by_name['x'][0].id: expected a string, found 5"),
             ({"n": 1, "by_name": {"x": 5}}, "x.by_name['x']: expected a list of objects, found 5"),
             ({"n": 1, "pair": [2, "a"]}, "x.pair[1]: expected an integer, found 'a'"),  # the items first
             ({"n": 1, "pair": [2, 1]}, "x.pair: expected [low, high], low <= high, found [2, 1]")]
    for value, message in cases:
        with pytest.raises(InputFileError) as raised:
            check(value, "f.json: x", record, hint="give a good file")
        assert str(raised.value) == f"f.json: {message}; give a good file"


def test_a_long_value_is_shown_short_and_the_error_is_the_readers_own():
    class LayoutError(InputFileError):
        pass

    with pytest.raises(LayoutError, match=r"f.json: n: expected a string, found -1{36}\.\.\.$"):
        check({"n": -int("1" * 40)}, "f.json:", Record({"n": "a string"}), error=LayoutError)
    with pytest.raises(InputFileError, match="found a string of 100 characters"):
        check({"n": "x" * 100}, "f.json:", Record({"n": "an integer"}))


def test_compare_reads_a_run_file_that_begins_with_a_utf8_mark(typed, tmp_path):
    marked = tmp_path / "marked.json"
    marked.write_bytes(b"\xef\xbb\xbf" + (DATA / "h200_run.json").read_bytes())
    result = typed("cublas-det", "compare", DATA / "h200_run.json", marked)
    assert result.returncode in (0, 1) and "error" not in result.stderr, result.stderr


@pytest.mark.parametrize("encoding, name", [("utf-16-le", "UTF-16"), ("utf-16-be", "UTF-16"), ("utf-32-le", "UTF-32")])
def test_a_utf16_or_utf32_file_is_named_with_the_fix(typed, tmp_path, encoding, name):
    text = (DATA / "h200_run.json").read_text()
    wide = tmp_path / "wide.json"
    wide.write_bytes(("\ufeff" + text).encode(encoding))  # with its byte-order mark, as editors save it
    result = typed("cublas-det", "compare", DATA / "h200_run.json", wide)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert f"{wide}: {name} text; save it as UTF-8; give a file that --json wrote" in result.stderr


def test_a_key_twice_in_one_object_is_refused_naming_it(tmp_path):
    from cublas_det.store.run import load_run

    doubled = tmp_path / "doubled.json"
    text = (DATA / "h200_run.json").read_text()
    doubled.write_text(text.replace('"benchmarks":', '"benchmarks": [], "benchmarks":', 1))
    assert '"benchmarks": [], "benchmarks":' in doubled.read_text()
    with pytest.raises(InputFileError, match=r'doubled.json: the key "benchmarks" appears twice in one object'):
        load_run(str(doubled))
    assert load_run(str(DATA / "h200_run.json")).entries  # each key once: read as before


def test_the_run_file_has_one_reader_one_codec_and_one_unit_conversion():
    """One home each: report, compare and bench --compare read a file with store.run.load_run (report then
    renders the same StoredRun through store.results.read_result, which writes it too); the records the file and the worker protocol carry
    are schema.Codec's; the file's seconds and the timing's microseconds meet only in store.run."""
    import inspect
    import re

    from cublas_det.results.check import ScenarioResult
    from cublas_det.check.worker import protocol
    from cublas_det.cli import bench, compare, gemms, report
    from cublas_det.render import compare as render_compare
    from cublas_det.store import results as store_results
    from cublas_det.store import run as store_run
    from cublas_det.base.schema import Codec
    from cublas_det.results.timing import Discards
    from cublas_det.results.stats import Ratio

    for module in (report, compare, gemms):
        source = inspect.getsource(module)
        assert "load_run" in source and not re.search(r"json\.load|read_json", source), module.__name__
    assert list(inspect.signature(store_results.read_result).parameters.values())[0].annotation in (
        "StoredRun", store_run.StoredRun)
    for cls in (ScenarioResult, Ratio, Discards, protocol.Task, protocol.Request, protocol.TaskAnswer,
                protocol.Answer):
        assert issubclass(cls, Codec), cls
    assert "def from_dict" not in inspect.getsource(Ratio) + inspect.getsource(Discards)
    for module in (store_results, render_compare, bench, report, compare):
        assert not re.search(r"\b1e-?6\b", inspect.getsource(module)), module.__name__
    conversions = re.findall(r"\b1e-?6\b", inspect.getsource(store_run))
    assert conversions == ["1e-6", "1e6"]  # seconds() and micros()


def _unchecked(record_type, schema, added=()) -> set:
    """The fields a record holds that a file's schema of it does not check, and the schema's own that the
    record lacks, but for ``added`` (what the file keeps beside the record); ``schema``: a Record, or one phrase
    for every field."""
    fields = {field.name for field in dataclasses.fields(record_type)} | set(added)
    return fields ^ set(schema.fields) if isinstance(schema, Record) else set()


ITEMS_OF_INTEGERS = "an object of integers >= 0"  # the schema of `cublas_det.timing[shape].discards`


def test_each_record_a_file_holds_is_checked_field_for_field_by_its_schema():
    """A record written to a file (a run's scenario results, ratios and discarded rounds, a lock's GEMM key, a
    capture's GEMM) has a schema naming every field it holds and no other, and what a run writes passes it: a
    field added to a record fails here until the reader checks it too."""
    from cublas_det.core.key import GemmKey
    from cublas_det.core.definition import GemmDefinition
    from cublas_det.results.check import Kind, ScenarioResult
    from cublas_det.apilog import file as capture_file
    from cublas_det.lock import file as store_lock
    from cublas_det.store import run as store_run
    from cublas_det.results.timing import Discards
    from cublas_det.results.stats import Ratio

    assert store_run._TIMING.fields["discards"] == ITEMS_OF_INTEGERS
    assert store_run._EXTRA_INFO.fields["scenarios"] == Each(store_run._SCENARIO)
    assert store_run._SECTION.fields["ratios"] == Each(Each(store_run._RATIO), dict)
    assert store_lock._ENTRY.fields["gemm"] is store_lock._GEMM
    assert capture_file._CAPTURE.fields["gemms"].item.fields.items() >= capture_file._GEMM.fields.items()
    assert not _unchecked(GemmKey, store_lock._GEMM)
    assert not _unchecked(GemmDefinition, capture_file._GEMM, added=("id", "calls"))
    scenario = ScenarioResult("repeat", Kind.GUARANTEE, 3, 1, 5, 64, 0.5, 2, (1, 2), 0.25, 0.75, "d", {"x": 1}, "e",
                              "n", 1, 1)
    ratio = Ratio("TF32", "PEDANTIC", 0.5, 0.4, 0.6, 9, 0.01, 4)
    for record, schema in ((scenario, store_run._SCENARIO), (ratio, store_run._RATIO),
                           (Discards(1, 2, 3, 4), ITEMS_OF_INTEGERS)):
        assert not _unchecked(type(record), schema), type(record).__name__
        assert None not in record.to_dict().values(), type(record).__name__  # every field is checked below
        check({"record": record.to_dict()}, "run.json:", Record({"record": schema}))
    # The check catches a record grown by a field its schema lacks.
    grown = dataclasses.make_dataclass("Grown", [("setup_spread", float, 0.0)], bases=(Ratio,), frozen=True)
    assert _unchecked(grown, store_run._RATIO) == {"setup_spread"}
