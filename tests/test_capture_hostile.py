"""Capture against hostile logs and files: each case made in the test from the real logs of
tests/data/capture (cut, CRLF, wrong types, out-of-bounds values, limits), no GPU needed."""

import contextlib
import gzip
import json
import os
import re
import signal
import time

import pytest

from cublas_det.apilog import file as capture_file
from cublas_det.base.files import write_json
from cublas_det.cli import capture as capture_cli

from .test_capture import DATA, log, parse, stored
from .conftest import unwrapped


def _from(tmp_path, *logs, argv=()):
    """``capture --from`` on ``logs`` (name, bytes) written to tmp_path: (exit code, report, stderr, data)."""
    paths = []
    for name, text in logs:
        (tmp_path / name).write_bytes(text)
        paths.append(str(tmp_path / name))
    out = tmp_path / "c.json"
    return out, ["--from", *paths, "--out", str(out), *argv]


def run_from(tmp_path, capsys, *logs, argv=()):
    out, args = _from(tmp_path, *logs, argv=argv)
    code = capture_cli.main(args)
    written = capsys.readouterr()
    data = json.loads(out.read_text()) if out.exists() else None
    return code, written.out, unwrapped(written.err), data


def test_from_reads_the_projects_own_gzipped_logs(tmp_path, capsys):
    code, text, err, data = run_from(tmp_path, capsys, ("b.log.gz", (DATA / "block.cublas.log.gz").read_bytes()),
                                     ("lt.gz", (DATA / "block.cublaslt.log.gz").read_bytes()))
    assert code == 0 and "neither" not in err
    assert data["calls"] == 18 and len(data["gemms"]) == 6
    assert data["logs"]["cublas"]["bytes"] == len(log("block", "cublas"))  # counted as read, decompressed


def test_a_gzip_log_cut_short_is_read_up_to_the_cut_and_a_corrupt_one_refused_in_one_line(tmp_path, capsys):
    packed = gzip.compress(log("block", "cublas"))
    code, text, err, data = run_from(tmp_path, capsys, ("cut.gz", packed[:len(packed) // 2]))
    assert code == 0 and "the gzip file ends early (cut)" in data["notes"][0]
    assert 0 < data["calls"] < 18
    corrupt = packed[:20] + bytes(b ^ 0x55 for b in packed[20:200]) + packed[200:]
    code, text, err, data = run_from(tmp_path, capsys, ("bad.gz", corrupt))
    assert code == 2 and "does not decompress" in err and "Traceback" not in err and len(err.splitlines()) == 1


@pytest.mark.parametrize("packed", [False, True], ids=["plain", "gzip"])
@pytest.mark.parametrize("blank", [b"\n" * 5000, b" \n" * 4097, b" " * 9000 + b"\n"], ids=["lines", "spaces", "a line"])
def test_a_log_whose_first_kilobytes_are_blank_is_read_whole(tmp_path, capsys, blank, packed):
    text = blank + log("block", "cublas")
    code, out, err, data = run_from(tmp_path, capsys, ("b.log", gzip.compress(text) if packed else text))
    assert code == 0 and not data["notes"] and "empty" not in out, out
    assert data["calls"] == 18 and len(data["gemms"]) == 6 and data["logs"]["cublas"]["bytes"] == len(text)


_CORRUPT = gzip.compress(b"")[:10] + b"\xff" * 64  # a deflate block of an invalid type
_AFTER = {"garbage": (b"trailing garbage\n", "goes on with bytes that are not gzip"),
          "a member's start": (b"\x1f\x8b\x08", "ends early (cut)"), "a corrupt member": (_CORRUPT, "has corrupt data")}


@pytest.mark.parametrize("after", _AFTER)
def test_a_gzip_log_followed_by_other_bytes_keeps_every_call_and_says_what_stopped_it(tmp_path, capsys, after):
    text = log("block", "cublas")
    members = gzip.compress(text[:len(text) // 2]) + gzip.compress(text[len(text) // 2:])
    code, out, err, data = run_from(tmp_path, capsys, ("g.gz", members + _AFTER[after][0]))
    assert code == 0 and data["calls"] == 18 and len(data["gemms"]) == 6, err
    assert len(data["notes"]) == 1 and data["notes"][0].endswith(": read up to there") and not data["complete"]
    assert f"the gzip file {_AFTER[after][1]}" in data["notes"][0]
    assert "incomplete: a log is not whole" in " ".join(out.split())


@pytest.mark.parametrize("split", [0, 5, 1000], ids=["newline-member-first", "first-line-split", "1000-byte-members"])
def test_a_gzip_log_of_several_members_reads_whole(tmp_path, capsys, split):
    text = log("block", "cublas")
    parts = [b"\n", text] if split == 0 else [text[i:i + split] for i in range(0, len(text), split)]
    code, _, err, data = run_from(tmp_path, capsys, ("m.gz", b"".join(gzip.compress(part) for part in parts)))
    assert code == 0 and "neither" not in err and "empty" not in err, err
    assert data["calls"] == 18 and len(data["gemms"]) == 6


def _blocks(text: bytes) -> list[bytes]:
    """A cuBLAS log's call records, each with its ``I! cuBLAS`` line and its line ends."""
    return [b"I! cuBLAS " + b for b in (b"\n" + text).split(b"\nI! cuBLAS ")[1:]]


def _log(*blocks: bytes) -> bytes:
    return b"\n".join(b.rstrip(b"\n") for b in blocks) + b"\n"


def _gemm_ex(m=None, lda=None, mode=None) -> bytes:
    """The one-thread misc log's first cublasGemmEx call, with m, lda or its context line's math mode changed."""
    block = next(b for b in _blocks(log("misc", "cublas")) if b"cublasGemmEx(" in b)
    if m is not None:
        block = re.sub(rb"i!  m: type=int; val=\d+", b"i!  m: type=int; val=%s" % str(m).encode(), block)
    if lda is not None:
        block = re.sub(rb"i!  lda: type=int; val=\d+", b"i!  lda: type=int; val=%d" % lda, block)
    if mode is not None:
        block = re.sub(rb"MathMode=\S+", b"MathMode=" + mode, block)
    return block


def _unread(stats) -> int:
    return stats.malformed + stats.interleaved + stats.unknown_lines + stats.cut + stats.invalid_gemms


@pytest.mark.parametrize("chunk", [7, 1 << 20])
def test_crlf_logs_are_read_as_lf(chunk):
    lf = parse(log("block", "cublas"), log("block", "cublaslt"))
    crlf = parse(log("block", "cublas").replace(b"\n", b"\r\n"), log("block", "cublaslt").replace(b"\n", b"\r\n"),
                 chunk=chunk)
    assert sum(s.calls for s in crlf.gemms.values()) == 18 and crlf.gemms.keys() == lf.gemms.keys()
    assert not any(_unread(stats) for stats in crlf.logs.values())
    assert crlf.logs["cublaslt"].gemm_calls == lf.logs["cublaslt"].gemm_calls == 18


@pytest.mark.parametrize("change", ["missing", "extra"])
def test_a_call_with_a_field_line_missing_or_extra_in_a_one_thread_log_is_malformed_not_interleaved(change):
    text = log("misc", "cublas")
    at = text.index(b"cublasGemmEx(")
    line = re.compile(rb"i!  lda: type=int; val=\d+\n").search(text, at).group(0)
    capture = parse(text[:at] + text[at:].replace(line, b"" if change == "missing" else line + line, 1))
    stats = capture.logs["cublas"]
    assert (stats.malformed, stats.malformed_gemms, stats.interleaved) == (1, 1, 0)
    assert any("field lines for the 19 parameters" in sample for sample in stats.samples)
    assert sum(s.calls for s in capture.gemms.values()) == sum(s.calls for s in parse(text).gemms.values()) - 1


@pytest.mark.parametrize("change", ["missing", "extra"])
@pytest.mark.parametrize("chunk", [97, 1 << 20])
def test_a_call_with_a_field_line_missing_or_extra_between_whole_calls_of_two_threads_is_malformed(change, chunk):
    """It was blamed on lines that "interleave with another thread's": lines mixed in move from one call to
    the next, so the calls on either side would not be whole."""
    text = log("block", "cublas")  # two threads
    at = text.index(b"cublasGemmEx(")
    line = re.compile(rb"i!  lda: type=int; val=\d+\n").search(text, at).group(0)
    capture = parse(text[:at] + text[at:].replace(line, b"" if change == "missing" else line + line, 1), chunk=chunk)
    stats = capture.logs["cublas"]
    assert (stats.malformed, stats.malformed_gemms, stats.interleaved) == (1, 1, 0)
    assert any("field lines for the 19 parameters" in sample for sample in stats.samples)


def test_a_log_cut_inside_its_last_calls_math_mode_is_a_cut_call_never_a_gemm():
    gemm = _gemm_ex(mode=b"CUBLAS_DEFAULT_MATH|CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION")
    text = _log(gemm, gemm)
    capture = parse(text[:text.rindex(b"MathMode=") + len(b"MathMode=CUBLAS_DEFAULT")])
    stats = capture.logs["cublas"]
    assert [(d.math_mode, s.calls) for d, s in capture.gemms.items()] == [(16, 1)]
    assert (stats.cut, stats.malformed, stats.gemm_calls) == (1, 0, 1)
    whole = parse(text[:text.rindex(b"i! COMPILED WITH") + 20])  # the record's last line begun: nothing lost
    assert [s.calls for s in whole.gemms.values()] == [2] and whole.logs["cublas"].cut == 0


def test_a_cublaslt_log_cut_inside_its_last_matmul_line_is_a_cut_call_never_a_gemm():
    text = log("block_bias", "cublaslt")
    last = text.rindex(b"[Trace][cublasLtMatmul]")
    text = text[:text.index(b"\n", last) + 1]
    whole = parse(b"", text)
    cut = parse(b"", text[:text.index(b"workSpaceSizeInBytes=1048576", last) + len(b"workSpaceSizeInBytes=1048")])
    assert cut.gemms.keys() == whole.gemms.keys() and len(cut.gemms) == 2
    assert cut.logs["cublaslt"].cut == 1 and cut.logs["cublaslt"].malformed == 0
    assert sum(s.calls for s in cut.gemms.values()) == sum(s.calls for s in whole.gemms.values()) - 1


BAD_GEMMS = {"m = 0": dict(m=0), "m = -1": dict(m=-1), "50 digits": dict(m=10 ** 49), "2**63": dict(m=1 << 63),
             "lda < k": dict(lda=5)}


@pytest.mark.parametrize("case", BAD_GEMMS)
def test_a_gemm_call_with_arguments_out_of_bounds_is_counted_not_replayable_and_the_rest_kept(case, tmp_path):
    good = _gemm_ex()
    capture = parse(_log(good, _gemm_ex(**BAD_GEMMS[case]), good))
    stats = capture.logs["cublas"]
    assert stats.invalid_gemms == 1 and stats.gemm_calls == 2 and stats.malformed == 0
    assert [s.calls for s in capture.gemms.values()] == [2]
    name = {"m = 0": "m = 0 (a GEMM of no elements", "lda < k": "lda = 5 is below"}.get(case, "out of bounds")
    assert any(sample.startswith("invalid: cublasGemmEx: ") and name in sample for sample in stats.samples)
    path = tmp_path / "c.json"
    write_json(str(path), capture_file.to_dict(capture, complete=True))
    assert [p.replayed for p in capture_file.load(str(path)).plans] == [True]  # the writer's file, read back


@pytest.mark.parametrize("change", [(b"rows=768 cols=16384 ld=768]", b"rows=-1 cols=16384 ld=768]"),
                                    (b"rows=3352 cols=16384 ld=3352]", b"rows=3352 cols=16384 ld=3352 batchCount=0]")])
def test_a_cublaslt_matmul_with_a_layout_out_of_bounds_is_counted_not_replayable(change):
    text = log("block_bias", "cublaslt")
    first = text.index(b"[Trace][cublasLtMatmul]")
    line = text[text.rindex(b"\n", 0, first) + 1:text.index(b"\n", first) + 1]
    assert change[0] in line
    capture = parse(b"", text.replace(line, line.replace(change[0], change[1]), 1))
    stats = capture.logs["cublaslt"]
    assert stats.invalid_gemms == 1 and stats.malformed == 0
    assert sum(s.calls for d, s in capture.gemms.items() if d.is_lt) == 5


def test_everything_the_parser_accepts_the_file_reader_reads(tmp_path):
    good = _gemm_ex()
    hostile = [_log(good, _gemm_ex(**case)) for case in BAD_GEMMS.values()]
    hostile += [log("block", "cublas").replace(b"\n", b"\r\n"), log("misc", "cublas")[:-1000],
                log("streams_per_stream", "cublas"), _log(good).replace(b"val=CUBLAS_OP_N(0)", b"val=CUBLAS_OP_X(7)")]
    for i, text in enumerate(hostile):
        path = tmp_path / f"{i}.json"
        write_json(str(path), capture_file.to_dict(parse(text), complete=True))
        capture_file.load(str(path))


def test_a_grouped_batched_gemm_is_counted_as_seen_and_not_replayed():
    grouped = _gemm_ex().replace(b"cublasGemmEx(", b"cublasGemmGroupedBatchedEx(", 1)
    capture = parse(_log(_gemm_ex(), grouped, grouped))
    assert dict(capture.unreplayed) == {"cublasGemmGroupedBatchedEx": 2}
    assert [s.calls for s in capture.gemms.values()] == [1]
    found = stored(capture)
    assert found.data["unreplayed"] == {"cublasGemmGroupedBatchedEx": 2}


def test_sgemmex_reads_its_element_types():
    block = _gemm_ex()
    sgemm_ex = re.sub(rb"cublasGemmEx\(.*?, cublasComputeType_t, cublasGemmAlgo_t\)", lambda found: found.group(
        0).replace(b"cublasGemmEx(", b"cublasSgemmEx(").replace(b", cublasComputeType_t, cublasGemmAlgo_t", b""), block)
    sgemm_ex = re.sub(rb"i!  (computeType|algo): [^\n]*\n", b"", sgemm_ex)
    sgemm_ex = re.sub(rb"(Atype|Btype): type=cudaDataType_t; val=\w+\(\d+\)", rb"\1: type=cudaDataType_t; "
                      rb"val=CUDA_R_16BF(14)", sgemm_ex)
    sgemm_ex = re.sub(rb"Ctype: type=cudaDataType_t; val=\w+\(\d+\)", b"Ctype: type=cudaDataType_t; val=CUDA_R_32F(0)",
                      sgemm_ex)
    (definition,) = parse(_log(sgemm_ex)).gemms
    assert (definition.api, definition.a_type, definition.b_type, definition.c_type) == \
           ("cublasSgemmEx", "R_16BF", "R_16BF", "R_32F")


def test_a_handles_set_math_mode_before_its_first_gemm_applies_where_the_context_line_is_unknown():
    set_mode = next(b for b in _blocks(log("misc", "cublas")) if b"cublasSetMathMode(" in b)
    pedantic = set_mode.replace(b"val=CUBLAS_DEFAULT_MATH(0)", b"val=CUBLAS_PEDANTIC_MATH(2)")
    gemm = _gemm_ex(mode=b"CUBLAS_MATH_OF_A_LATER_VERSION")
    capture = parse(_log(pedantic, gemm, pedantic, gemm))
    assert [(d.math_mode, s.calls) for d, s in capture.gemms.items()] == [(2, 2)]


def _bench_capture(tmp_path, capsys, data) -> tuple[int, str]:
    from cublas_det.cli import bench as bench_cli

    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    code = bench_cli.main(["--capture", str(path)])
    return code, unwrapped(capsys.readouterr().err)


@pytest.mark.parametrize("case", ["huge m", "m of 2**62", "strides abc", "calls -3", "one id twice",
                                  "one GEMM twice"])
def test_bench_capture_checks_the_file_before_the_gpu_in_one_line(case, tmp_path, capsys):
    data = capture_file.to_dict(parse(log("misc", "cublas")), complete=True)
    first, strided = data["gemms"][0], next(g for g in data["gemms"] if g["strides"])
    change, named = {"huge m": ({**first, "m": 10 ** 30}, "m = 1000000000000000000000000000000"),
                     "m of 2**62": ({**first, "m": 1 << 62, "lda": 1 << 62, "ldc": 1 << 62},
                                    "more than any memory holds"),
                     "strides abc": ({**strided, "strides": "abc"}, "strides: expected a list of integers, found 'abc'"),
                     "calls -3": ({**first, "calls": -3}, "calls: expected a positive integer, found -3"),
                     "one id twice": ({**data["gemms"][1], "id": first["id"]}, "two GEMMs with the id g1"),
                     "one GEMM twice": ({**first, "id": "g99"}, "are the same GEMM")}[case]
    target = strided if case == "strides abc" else first
    data["gemms"] = [*data["gemms"], change] if case in ("one id twice", "one GEMM twice") else [
        change if g is target else g for g in data["gemms"]]
    code, err = _bench_capture(tmp_path, capsys, data)
    assert code == 2 and named in err and "GPU" not in err and "Traceback" not in err
    assert len(err.splitlines()) == 1


LATE_WRITER = """(sleep {sleep}; exec gzip -dc {log} > "$CUBLAS_LOGDEST_DBG") >/dev/null 2>&1 & exit 0"""


def test_logs_a_process_left_by_the_program_writes_soon_after_it_ends_are_read(tmp_path, capsys, monkeypatch):
    from cublas_det.apilog import run as capture_run

    monkeypatch.setattr(capture_run, "AFTER_EXIT_S", 3.0)
    program = LATE_WRITER.format(sleep=0.3, log=DATA / "block.cublas.log.gz")
    assert capture_cli.main(["--out", str(tmp_path / "c.json"), "--", "sh", "-c", program]) == 0
    data = json.loads((tmp_path / "c.json").read_text())
    assert data["calls"] == 18 and not data["logs"]["cublas"]["stopped_after_exit_s"]


def test_logs_written_after_capture_stopped_reading_are_named_with_how_to_get_them(tmp_path, capsys, monkeypatch):
    from cublas_det.apilog import run as capture_run

    monkeypatch.setattr(capture_run, "AFTER_EXIT_S", 0.2)
    program = LATE_WRITER.format(sleep=1.5, log=DATA / "block.cublas.log.gz")
    assert capture_cli.main(["--out", str(tmp_path / "c.json"), "--", "sh", "-c", program]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "stopped reading the cublas and cublaslt logs 0.2 s after the program ended" in text
    assert "read them with --from" in text and "CUBLAS_LOGINFO_DBG=1?" not in text


def test_a_process_left_opening_the_log_after_capture_stopped_reading_is_not_blocked(tmp_path, capsys, monkeypatch):
    from cublas_det.apilog import run as capture_run

    monkeypatch.setattr(capture_run, "AFTER_EXIT_S", 0.5)
    opened, pid = tmp_path / "opened", tmp_path / "pid"  # the open's status, once it returns; the process left
    program = f"""sh -c 'sleep 0.8; true > "$CUBLAS_LOGDEST_DBG"; echo $? > {opened}' >/dev/null 2>&1 & echo $! > {pid}"""
    try:
        assert capture_cli.main(["--out", str(tmp_path / "c.json"), "--", "sh", "-c", program]) == 0
        deadline = time.monotonic() + 5
        while not opened.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert opened.exists(), "the process left blocks opening the log"
    finally:
        with contextlib.suppress(OSError, ValueError):
            os.kill(int(pid.read_text()), signal.SIGKILL)


def _lines_fit(text: str) -> None:
    assert max(map(len, text.splitlines())) <= 100, [line for line in text.splitlines() if len(line) > 100]


def test_the_report_says_where_the_unread_is_quoted(tmp_path, capsys):
    text = log("misc", "cublas")
    at = text.index(b"\nI! cuBLAS ", 1000) + 1
    code, out, err, data = run_from(tmp_path, capsys, ("x.log", text[:at] + b"junk line\n" + text[at:-200]))
    assert code == 0 and "--json" not in out
    assert f"unread: 1 line not cublas's (cublas log), 1 call cut at the log's end (cublas log); quoted in " \
           f"{tmp_path / 'c.json'}: logs.*.samples" in " ".join(out.split())
    assert "every line read" not in out


def test_the_table_says_replayable_and_fits_a_long_math_mode_without_breaking_a_name(tmp_path, capsys):
    text = log("block", "cublas").replace(b"MathMode=CUBLAS_DEFAULT_MATH\n", b"MathMode=CUBLAS_DEFAULT_MATH|"
                                          b"CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION\n")
    code, out, err, data = run_from(tmp_path, capsys, ("b.log", text))
    _lines_fit(out.replace(str(tmp_path), "T"))
    rows = [line for line in out.splitlines() if "DEFAULT+DRPR" in line]
    assert len(rows) == 6 and all(re.search(r" mamba2-130m/\w+/\w+$", row) for row in rows), rows
    code, out, err, data = run_from(tmp_path, capsys, ("m.log", log("misc", "cublas")))
    assert any(line.endswith(" replayable") for line in out.splitlines()) and " replayed\n" not in out


def test_no_gemms_is_explained_by_what_the_logs_did_show(tmp_path, capsys):
    code, out, err, data = run_from(tmp_path, capsys, ("lt.log", log("block", "cublaslt")))
    assert "18 kernel launches made inside cuBLAS calls" in " ".join(out.split())
    assert "give it too (--from CUBLAS_LOG CUBLASLT_LOG)" in " ".join(out.split())
    assert "CUBLAS_LOGINFO_DBG=1 and" not in out
    state = [b for b in _blocks(log("misc", "cublas")) if b"cublasSetStream" in b]
    code, out, err, data = run_from(tmp_path, capsys, ("s.log", _log(*state)))
    assert f"GEMMs: none among the {len(state)} cuBLAS calls in the log" in out
    assert capture_cli.main(["--out", str(tmp_path / "r.json"), "--", "sh", "-c", "exit 3"]) == 3
    out = " ".join(capsys.readouterr().out.split())
    assert "the program wrote no cuBLAS API log line" in out and "CUBLAS_LOGINFO_DBG=1 and" not in out
    assert "incomplete: the program did not end normally; it logged no GEMM before it ended" in out
    assert "up to then" not in out


def test_calls_past_the_limits_and_gemms_not_read_are_named_in_the_report(tmp_path, capsys, monkeypatch):
    from cublas_det.apilog import model

    monkeypatch.setattr(model, "MAX_GEMMS", 2)
    monkeypatch.setattr(model, "MAX_SITES", 1)
    grouped = _gemm_ex().replace(b"cublasGemmEx(", b"cublasGemmGroupedBatchedEx(", 1)
    one = log("streams_one", "cublas")  # one GEMM on 4 streams
    code, out, err, data = run_from(tmp_path, capsys, ("m.log", log("misc", "cublas") + grouped))
    out = " ".join(out.split())
    assert f"not in the table: {data['dropped_calls']} calls of GEMMs past the first 2 distinct ones" in out
    assert data["dropped_calls"] >= 2
    assert "not replayable: 1 call of cublasGemmGroupedBatchedEx, which this version does not read" in out
    code, out, err, data = run_from(tmp_path, capsys, ("s.log", one))
    assert data["unattributed_calls"] == 24
    assert "not attributed: 24 calls from sites (process, handle, stream, thread) past the 1 kept per GEMM" in \
           " ".join(out.split())


def test_capture_help_and_usage_fit_100_columns_and_name_every_option(monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    text = capture_cli.build_parser("python3.11 -m cublas_det.capture").format_help()
    _lines_fit(text)
    usage = text.split("\n\n")[0]
    assert all(flag in usage for flag in ("--out", "--quiet", "--from", "--"))


def test_capture_of_a_no_op_gemm_writes_and_reports_the_rest(tmp_path, capsys):
    code, out, err, data = run_from(tmp_path, capsys, ("m.log", _log(_gemm_ex(), _gemm_ex(m=0), _gemm_ex(m=-1))))
    assert code == 0 and len(data["gemms"]) == 1 and "Traceback" not in err
    assert "not replayable: 2 GEMM calls of an empty or impossible shape (m = 0" in " ".join(out.split())


def test_every_capture_report_of_the_hostile_catalogue_fits_100_columns(tmp_path, capsys):
    good = _gemm_ex()
    grouped = good.replace(b"cublasGemmEx(", b"cublasGemmGroupedBatchedEx(", 1)
    catalogue = [log("block", "cublas").replace(b"\n", b"\r\n"), log("streams_per_stream", "cublas"),
                 _log(good, _gemm_ex(m=0), grouped), log("misc", "cublas")[:-300],
                 log("block", "cublas").replace(b"MathMode=CUBLAS_DEFAULT_MATH\n", b"MathMode=CUBLAS_PEDANTIC_MATH|"
                                                b"CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION\n")]
    for i, text in enumerate(catalogue):
        code, out, err, data = run_from(tmp_path, capsys, (f"{i}.log", text))
        assert code == 0, err
        _lines_fit((out + err).replace(str(tmp_path), "T"))
    code, out, err, data = run_from(tmp_path, capsys, ("lt.log", log("block_bias", "cublaslt")))
    _lines_fit((out + err).replace(str(tmp_path), "T"))
