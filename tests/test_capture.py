"""Capture: the log parsers on real cuBLAS 13.1 logs recorded on the H200 (tests/data/capture), the
findings, the replay translation, the capture file, the pipes and the command line. No GPU needed."""

import dataclasses
import gzip
import json
import os
import pathlib
import re
import sys
import textwrap

import pytest

from cublas_det.apilog import file as capture_file
from cublas_det.apilog.findings import Finding, findings
from cublas_det.apilog.model import Capture, Site
from cublas_det.bindings.cublas import ComputeType
from cublas_det.core.definition import OPERATIONS, GemmDefinition
from cublas_det.apilog.parse import CublasLogParser, LtLogParser
from cublas_det.apilog.run import run_captured
from cublas_det.base.files import write_json
from cublas_det.cli import bench as bench_cli
from cublas_det.cli import capture as capture_cli
from cublas_det.core.config import GemmConfig, ModeSource
from cublas_det.core.handle import Handle, LtPath

from .conftest import unwrapped

DATA = pathlib.Path(__file__).parent / "data" / "capture"
# The six GEMMs of the Mamba2-like block (in_proj 768 -> 3352, out_proj 1536 -> 768, T = 16384), row-major.
BLOCK = {"mamba2-130m/in_proj/forward": (16384, 3352, 768), "mamba2-130m/in_proj/dX": (16384, 768, 3352),
         "mamba2-130m/in_proj/dW": (3352, 768, 16384), "mamba2-130m/out_proj/forward": (16384, 768, 1536),
         "mamba2-130m/out_proj/dX": (16384, 1536, 768), "mamba2-130m/out_proj/dW": (768, 1536, 16384)}


def log(name: str, kind: str) -> bytes:
    return gzip.decompress((DATA / f"{name}.{kind}.log.gz").read_bytes())


def parse(cublas: bytes = b"", lt: bytes = b"", chunk: int = 1 << 20) -> Capture:
    capture = Capture()
    for parser, text in ((CublasLogParser(capture), cublas), (LtLogParser(capture), lt)):
        for start in range(0, len(text), chunk):
            parser.feed(text[start:start + chunk])
        parser.close()
    return capture


def stored(capture: Capture, complete: bool = True, compute_capability: int | None = 90):
    return capture_file.from_data(json.loads(json.dumps(capture_file.to_dict(
        capture, complete=complete, compute_capability=compute_capability))), "mem.json")


def test_bf16_block_six_gemms_three_calls_each_the_internal_lt_calls_joined_not_counted():
    found = stored(parse(log("block", "cublas"), log("block", "cublaslt")))
    assert found.data["calls"] == 18
    plans = found.plans
    assert {plan.like: (plan.shape.m, plan.shape.n, plan.shape.k) for plan in plans} == BLOCK
    assert all(plan.calls == 3 and plan.replayed and not plan.note for plan in plans)
    assert {plan.config for plan in plans} == {GemmConfig(0, False, 68, "bfloat16", "bfloat16", 99, 32 << 20)}
    gemms = found.data["gemms"]
    assert all(sum(k["calls"] for k in g["lt_kernels"]) == 3 for g in gemms)  # the TST launches, joined
    assert found.data["logs"]["cublaslt"]["gemm_calls"] == 18 and not found.data["notes"]
    # forward on the main thread's handle, the backward on autograd's thread and handle
    assert len(found.data["handles"]) == 2 and sorted(h["calls"] for h in found.data["handles"]) == [6, 12]
    assert {f.id for f in found.findings} == {"rpr-allowed", "split-k"}
    split = next(f for f in found.findings if f.id == "split-k")
    assert "numSplitsK=4" in split.text and split.gemms == (next(p.gemm_id for p in plans
                                                                  if p.like == "mamba2-130m/out_proj/dW"),)


@pytest.mark.parametrize("chunk", [1, 7, 4096, 65537])
def test_any_chunking_gives_the_same_capture(chunk):
    whole = capture_file.to_dict(parse(log("block", "cublas"), log("block", "cublaslt")), complete=True)
    pieces = capture_file.to_dict(parse(log("block", "cublas"), log("block", "cublaslt"), chunk=chunk),
                                  complete=True)
    for data in (whole, pieces):
        for kind in data["logs"].values():
            kind.pop("path")
    assert pieces == whole


def test_the_replay_issues_the_captured_cublas_call_argument_for_argument():
    replayed = set()
    for name in ("block", "block_fp32", "block_bias", "misc"):
        for plan in stored(parse(log(name, "cublas"), log(name, "cublaslt"))).plans:
            if not plan.replayed:
                continue
            shape, d, config = plan.shape, plan.definition, plan.config
            # closed (no cuBLAS handle is made): it only says what it would issue
            path = LtPath(config, 0, 0, 0) if config.api == "lt" else None
            handle = Handle(0, config, ModeSource.ARGUMENT, 0, lt_path=path)
            issued = handle.definition(config.input_dtype, config.output_dtype, config.compute_type, shape.trans_a,
                                       shape.trans_b, shape.m, shape.n, shape.k, shape.batch)
            fields = ("transa", "transb", "m", "n", "k", "lda", "ldb", "ldc", "a_type", "b_type", "c_type",
                      "compute_type", "batch_count")
            assert [getattr(issued, f) for f in fields] == [getattr(d, f) for f in fields], plan
            assert issued.strides == d.strides, plan  # the captured strides are the packed ones
            replayed.add(issued.api)
            if issued.is_lt:
                assert (issued.epilogue, issued.scale_type) == (d.epilogue, d.scale_type), plan
                continue
            assert issued.algo == (d.algo if d.algo is not None else -1)
            args = issued.gemm_ex_args(1, 2, 3, 4, 5)  # what cublasGemmEx is given, from the definition
            assert (args[:5], args[8], args[11], args[15], args[16], args[17]) == (
                (OPERATIONS[d.transa], OPERATIONS[d.transb], d.m, d.n, d.k), d.lda, d.ldb, d.ldc,
                int(ComputeType[d.compute_type]), issued.algo)
    assert replayed == {"cublasGemmEx", "cublasGemmStridedBatchedEx", "cublasLtMatmul"}


def test_fp32_with_tf32_allowed_replays_in_tf32_math_and_says_so():
    found = stored(parse(log("block_fp32", "cublas"), log("block_fp32", "cublaslt")))
    assert {plan.config.name for plan in found.plans} == {"TF32/ws32M"}
    assert {p.definition.api for p in found.plans} == {"cublasSgemm"}
    assert any(f.id == "tf32-math" and f.kind == "precision" for f in found.findings)


def test_biased_linear_lt_calls_captured_with_epilogue_and_replayed_through_cublaslt():
    found = stored(parse(log("block_bias", "cublas"), log("block_bias", "cublaslt")))
    lt = [p for p in found.plans if p.definition.is_lt]
    assert sorted(p.like for p in lt) == ["mamba2-130m/in_proj/forward", "mamba2-130m/out_proj/forward"]
    for plan in lt:
        assert plan.replayed and plan.calls == 3 and plan.config.name == "DEFAULT/ws1M/lt-bias/bfloat16->bfloat16"
        assert plan.definition.bias and plan.definition.workspace_bytes == 1 << 20
        assert dict(plan.definition.preference)["maxWorkspaceSizeinBytes"] == "1048576"
        assert dict(plan.definition.lt_algo)["algoId"] == "66"
    assert sum(p.replayed for p in found.plans) == 6


def test_batched_calls_replay_batched_and_fp64_calls_are_listed_with_what_they_need():
    plans = {p.definition.api + "/" + p.definition.a_type: p
             for p in stored(parse(log("misc", "cublas"), log("misc", "cublaslt"))).plans}
    strided = plans["cublasGemmStridedBatchedEx/R_16BF"]
    assert strided.definition.strides == (65536, 131072, 32768)
    assert strided.replayed and strided.shape.batch == 8 and strided.shape.spec == "256x128x512:nn:b8"
    assert strided.shape.a_shape == (8, 256, 512) and strided.note == ""  # packed, as captured
    assert plans["cublasSgemmStridedBatched/R_32F"].shape.batch == 8
    assert plans["cublasGemmEx/R_64F"].reason.startswith("needs R_64F")
    assert plans["cublasGemmEx/R_16F"].replayed
    # Pointer arrays and strides other than the packed ones are replayed packed, and say so.
    from cublas_det.core.key import plan

    pointers = dataclasses.replace(strided.definition, api="cublasGemmBatchedEx", strides=None)
    assert "arrays of pointers: replayed as one strided batch" in plan("g9", pointers, 1).note
    gapped = dataclasses.replace(strided.definition, strides=(65536, 0, 32768))  # B broadcast: stride 0
    assert "the call's strides were 65536, 0, 32768, packed 65536, 131072, 32768" in plan("g9", gapped, 1).note
    one = plan("g9", dataclasses.replace(strided.definition, batch_count=1), 1)
    assert one.shape.batch == 1 and "a batch of one: replayed as one GEMM" in one.note
    # A batch is never named after a catalogue role (the catalogue has no batches).
    dw = next(p for p in stored(parse(log("block", "cublas"))).plans if p.like.endswith("out_proj/dW"))
    assert plan("g9", dataclasses.replace(dw.definition, batch_count=4, strides=(1, 1, 1)), 1).like == ""


def test_malformed_unknown_and_cut_lines_are_counted_and_quoted_never_fatal():
    text = log("block", "cublas")
    blocks = text.split(b"\nI! cuBLAS ")
    gemm = next(i for i, b in enumerate(blocks) if b"cublasGemmEx(" in b)
    blocks[gemm] = blocks[gemm].replace(b"val=3352", b"val=33x2", 1)  # a number that is not one
    broken = (b"garbage before the log\n" + b"\nI! cuBLAS ".join(blocks)[:-300]  # cut mid-call
              + b"\nnot a cuBLAS line\n")
    lt = log("block", "cublaslt") + b"[2026-12-01 19:38:06][cublasLt][1][Trace][cublasLtTSTMatmul] A=0X1 Adesc=[rows=1]\n"
    capture = parse(broken, lt)
    stats = capture.logs["cublas"]
    assert stats.malformed >= 1 and stats.unknown_lines >= 1
    assert any("garbage before the log" in s for s in stats.samples)
    assert capture.logs["cublaslt"].malformed == 1
    assert sum(s.calls for s in capture.gemms.values()) == 17  # the broken GemmEx call, and only it, lost
    found = stored(capture)
    assert found.data["logs"]["cublas"]["samples"]


def _streams_log(handles: int) -> bytes:
    """The block's first GemmEx call, issued on 4 streams through `handles` handle(s)."""
    blocks = log("block", "cublas").split(b"\nI! cuBLAS ")
    gemm = next(b for b in blocks if b"cublasGemmEx(" in b)
    out = []
    for i in range(4):
        handle = b"0x0x%x" % (0x1000 + (i if handles == 4 else 0))
        text = gemm.replace(b"0x0x255be240", handle).replace(b"0x0x29acdb60", handle)
        out.append(text.replace(b"StreamId=POINTER (IN HEX:0x(nil)) (defaultStream)",
                                b"StreamId=POINTER (IN HEX:0x0x%x)" % (0xA000 + i)))
    return b"I! cuBLAS " + b"\nI! cuBLAS ".join(out)


def test_one_handle_on_four_streams_is_a_hazard_naming_the_handle_and_streams():
    found = stored(parse(_streams_log(1)))
    shared = [f for f in found.findings if f.id == "shared-handle-streams"]
    assert len(shared) == 1 and shared[0].kind == "hazard"
    assert shared[0].handles == ("0x1000",) and shared[0].streams == ("0xa000", "0xa001", "0xa002", "0xa003")
    assert not [f for f in stored(parse(_streams_log(4))).findings if f.id.startswith("shared-handle")]


def test_capture_file_round_trip_and_bad_files(tmp_path):
    path = tmp_path / "c.json"
    data = capture_file.to_dict(parse(log("block", "cublas"), log("block", "cublaslt")), complete=True)
    write_json(str(path), data)
    loaded = capture_file.load(str(path))
    assert [(p.gemm_id, p.shape, p.config) for p in loaded.plans] == \
           [(p.gemm_id, p.shape, p.config) for p in capture_file.from_data(data, "x").plans]
    bad = {"not-json": "{", "other": json.dumps({"format": "x"}), "version": json.dumps({**data, "version": 99}),
           "gemm": json.dumps({**data, "gemms": [{**data["gemms"][0], "m": "16384"}]})}
    for name, text in bad.items():
        (tmp_path / name).write_text(text)
        with pytest.raises(capture_file.InputFileError, match=str(tmp_path / name)):
            capture_file.load(str(tmp_path / name))


FAKE_PROGRAM = textwrap.dedent("""
    import gzip, os, sys
    data = sys.argv[1]
    cublas = gzip.open(os.path.join(data, "block.cublas.log.gz")).read()
    half = cublas.index(b"\\nI! cuBLAS ", len(cublas) // 2) + 1
    for part in (cublas[:half], cublas[half:]):  # two writers one after the other, as two processes would
        with open(os.environ["CUBLAS_LOGDEST_DBG"], "wb") as f:
            f.write(part)
    with open(os.environ["CUBLASLT_LOG_FILE"], "wb") as f:
        f.write(gzip.open(os.path.join(data, "block.cublaslt.log.gz")).read())
    sys.exit(int(sys.argv[2]))
""")


@pytest.mark.parametrize("status", [0, 3])
def test_run_captured_streams_both_logs_through_pipes_and_keeps_the_exit_status(tmp_path, status, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # where the pipes' folder is made, to see it is gone
    monkeypatch.setattr("tempfile.tempdir", None)
    program = tmp_path / "fake.py"
    program.write_text(FAKE_PROGRAM)
    capture = Capture()
    got, interrupted = run_captured([sys.executable, str(program), str(DATA), str(status)], capture)
    assert (got, interrupted) == (status, False)
    assert sum(s.calls for s in capture.gemms.values()) == 18 and capture.logs["cublas"].malformed == 0
    assert not list(tmp_path.glob("cublas-det-capture-*"))


def test_cli_capture_runs_the_command_writes_the_file_and_exits_with_its_status(tmp_path, capsys):
    program = tmp_path / "fake.py"
    program.write_text(FAKE_PROGRAM)
    out = tmp_path / "cap.json"
    assert capture_cli.main(["--out", str(out), "--", sys.executable, str(program), str(DATA), "5"]) == 5
    text = capsys.readouterr().out
    assert "the command failed (exit 5)" in text and "incomplete" in text
    assert f"  cublas-det bench --capture {out}\n" in text  # the command on a line of its own
    paths = (str(tmp_path), sys.executable, str(DATA))  # the command's own words, wrapped whole
    assert max(len(line) for line in text.splitlines() if not any(path in line for path in paths)) <= 100
    data = json.loads(out.read_text())
    assert data["exit_status"] == 5 and data["complete"] is False and len(data["gemms"]) == 6


def test_cli_capture_from_logs_and_its_refusals(tmp_path, capsys):
    for name in ("block", "block_bias"):
        for kind in ("cublas", "cublaslt"):
            (tmp_path / f"{name}.{kind}.log").write_bytes(log(name, kind))
    out = str(tmp_path / "c.json")
    assert capture_cli.main(["--from", str(tmp_path / "block.cublas.log"), str(tmp_path / "block.cublaslt.log"),
                             "--out", out]) == 0
    assert "mamba2-130m/in_proj/dW" in capsys.readouterr().out
    (tmp_path / "junk.log").write_text("hello\n")
    cases = [["--from", str(tmp_path / "junk.log")], ["--from", str(tmp_path / "block.cublas.log"),
                                                       str(tmp_path / "block_bias.cublas.log")],
             ["--from", str(tmp_path / "nothere.log")], [], ["--from", str(tmp_path / "block.cublas.log"), "--",
                                                             "true"], ["--out", str(tmp_path / "no" / "x.json"),
                                                                       "--", "true"],
             ["--", str(tmp_path / "not-a-program")]]
    for argv in cases:
        with pytest.raises(SystemExit) if argv in ([], cases[4]) else _nothing():
            assert capture_cli.main(argv + (["--out", out] if "--out" not in argv else [])) == 2
        err = unwrapped(capsys.readouterr().err)
        assert "Traceback" not in err and "error" in err, argv


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_bench_capture_refuses_other_shape_options_and_bad_files_before_any_gpu_work(tmp_path, capsys):
    out = tmp_path / "c.json"
    write_json(str(out), capture_file.to_dict(parse(log("block", "cublas")), complete=True))
    with pytest.raises(SystemExit):
        bench_cli.main(["--capture", str(out), "--preset", "trunk"])
    assert "drop --preset" in unwrapped(capsys.readouterr().err)
    (tmp_path / "bad.json").write_text("[]")
    assert bench_cli.main(["--capture", str(tmp_path / "bad.json")]) == 2
    assert "not a capture file" in unwrapped(capsys.readouterr().err)
    unreplayable = tmp_path / "batched.json"
    data = capture_file.to_dict(parse(log("misc", "cublas")), complete=True)
    data["gemms"] = [g for g in data["gemms"] if g["a_type"] == "R_64F"]
    write_json(str(unreplayable), data)
    assert bench_cli.main(["--capture", str(unreplayable)]) == 2
    assert "no GEMM in it can be replayed" in unwrapped(capsys.readouterr().err)


def test_gemm_config_carries_algo_and_workspace_through_its_name_and_json():
    config = GemmConfig(0, False, 68, "bfloat16", "bfloat16", 99, 32 << 20)
    assert config.name == "DEFAULT/algo99/ws32M/bfloat16->bfloat16"
    assert GemmConfig.from_dict(config.to_dict()) == config
    assert "algo" not in GemmConfig().to_dict() and "workspace_bytes" not in GemmConfig().to_dict()
    for bad in ({"algo": 1.5}, {"algo": True}, {"workspace_bytes": -1}):
        with pytest.raises(ValueError):
            GemmConfig(**bad)


def test_python_m_capture_runs(tmp_path):
    import subprocess

    result = subprocess.run([sys.executable, "-m", "cublas_det.capture", "--help"], capture_output=True, text=True,
                            env={**os.environ, "COLUMNS": "100"})
    assert result.returncode == 0 and "--from" in result.stdout
    assert max(map(len, result.stdout.splitlines())) <= 100


def test_cupy_four_streams_through_one_handle_recorded_on_the_h200():
    found = stored(parse(log("streams_one", "cublas"), log("streams_one", "cublaslt")))
    shared = [f for f in found.findings if f.id == "shared-handle-streams"]
    assert len(shared) == 1 and shared[0].kind == "hazard" and len(shared[0].streams) == 4
    assert shared[0].handles[0] in shared[0].text and all(s in shared[0].text for s in shared[0].streams)
    assert found.data["calls"] == 32 and found.data["logs"]["cublas"]["interleaved"] == 0


def test_threads_logging_at_once_interleave_lines_and_those_calls_are_counted_unread():
    # a handle per stream, one thread each: cuBLAS writes each call line by line, and the lines mix
    found = stored(parse(log("streams_per_stream", "cublas"), log("streams_per_stream", "cublaslt")))
    stats = found.data["logs"]["cublas"]
    assert stats["interleaved_gemms"] > 0 and stats["gemm_calls"] == found.data["calls"]
    assert stats["gemm_calls"] + stats["interleaved_gemms"] + stats["malformed"] == 32  # 4 threads x 8 calls
    assert not [f for f in found.findings if f.id.startswith("shared-handle")]
    assert all(len(h["streams"]) == 1 for h in found.data["handles"])
    text = capture_cli.render_capture(found, "c.json")
    assert f"unread: {stats['interleaved']} calls ({stats['interleaved_gemms']} of them GEMMs) whose log lines " \
           "interleave" in " ".join(text.split())


def _block(text: bytes, function: bytes) -> bytes:
    return next(b for b in text.split(b"\nI! cuBLAS ") if function in b)


def _calls(*blocks: bytes) -> bytes:
    return b"I! cuBLAS " + b"\nI! cuBLAS ".join(b.rstrip(b"\n") for b in blocks) + b"\n"


def test_the_state_of_the_handle_at_each_call_defines_the_gemm():
    text = log("block", "cublas")
    gemm, workspace, stream = (_block(text, name) for name in (b"cublasGemmEx(", b"cublasSetWorkspace_v2(",
                                                                 b"cublasSetStream_v2("))
    handle = re.search(rb"Handle=POINTER \(IN HEX:0x0x([0-9a-f]+)", gemm).group(1)
    workspace = re.sub(rb"0x0x[0-9a-f]+\)\ni!  workspace:", b"0x0x" + handle + b")\ni!  workspace:", workspace)
    workspace = re.sub(rb"Handle=POINTER \(IN HEX:0x0x[0-9a-f]+", b"Handle=POINTER (IN HEX:0x0x" + handle, workspace)
    stream = re.sub(rb"0x0x[0-9a-f]+", b"0x0x" + handle, stream, count=1)
    stream = re.sub(rb"Handle=POINTER \(IN HEX:0x0x[0-9a-f]+", b"Handle=POINTER (IN HEX:0x0x" + handle, stream)
    pedantic = gemm.replace(b"MathMode=CUBLAS_DEFAULT_MATH", b"MathMode=CUBLAS_PEDANTIC_MATH")
    small = workspace.replace(b"val=33554432", b"val=1048576")
    capture = parse(_calls(workspace, gemm, pedantic, small, gemm, stream, gemm))
    seen = [(d.math_mode, d.workspace_bytes, s.calls) for d, s in capture.gemms.items()]
    # 32 MiB DEFAULT, 32 MiB PEDANTIC, then 1 MiB, then cuBLAS's own after cublasSetStream reset it
    assert sorted(seen, key=str) == sorted([(0, 32 << 20, 1), (2, 32 << 20, 1), (0, 1 << 20, 1), (0, None, 1)],
                                           key=str)


def test_a_gemm_after_a_workspace_call_the_log_lost_has_its_workspace_unknown_never_a_value():
    """Two processes writing one log: a GEMM read with no workspace where its call had 32 MiB, its
    cublasSetWorkspace call lost in the mixing."""
    from cublas_det.core.key import plan

    text = log("block", "cublas")
    gemm, workspace = (_block(text, name) for name in (b"cublasGemmEx(", b"cublasSetWorkspace_v2("))
    handle = re.search(rb"Handle=POINTER \(IN HEX:0x0x([0-9a-f]+)", gemm).group(1)
    workspace = re.sub(rb"0x0x[0-9a-f]+\)\ni!  workspace:", b"0x0x" + handle + b")\ni!  workspace:", workspace)
    workspace = re.sub(rb"Handle=POINTER \(IN HEX:0x0x[0-9a-f]+", b"Handle=POINTER (IN HEX:0x0x" + handle, workspace)
    assert [d.workspace_bytes for d in parse(_calls(workspace, gemm)).gemms] == [32 << 20]
    lost = re.sub(rb"i!  workspaceSizeInBytes: [^\n]*\n", b"", workspace)  # a field line lost: the call unread
    capture = parse(_calls(lost, gemm, workspace, gemm))
    assert capture.logs["cublas"].malformed == 1
    seen = {d: s.calls for d, s in capture.gemms.items()}
    assert sorted((d.workspace_unknown, d.workspace_bytes) for d in seen) == [(False, 32 << 20), (True, None)]
    unknown = next(d for d in seen if d.workspace_unknown)
    assert plan("g1", unknown, 1).reason == "needs the handle's workspace, set by a call the log lost"
    found = stored(capture)
    assert [g.get("workspace_unknown", False) for g in found.data["gemms"]].count(True) == 1
    assert "unknown" in capture_cli.render_capture(found, "c.json")


def test_lines_of_two_calls_mixed_are_never_read_as_one_call():
    text = log("streams_one", "cublas")
    lines = (b"I! cuBLAS " + _block(text, b"cublasGemmEx(")).rstrip(b"\n").split(b"\n")

    def thread(number, handle, m, n):
        out = []
        for line in lines:
            line = re.sub(rb"Thread=\d+", b"Thread=%d" % number, line)
            line = re.sub(rb"IN HEX:0x0x[0-9a-f]{8}\)", b"IN HEX:0x0x%x)" % handle, line, count=1) \
                if line.startswith((b"i!  handle", b"i!Process")) else line
            line = re.sub(rb"^i!  m: type=int; val=\d+", b"i!  m: type=int; val=%d" % m, line)
            line = re.sub(rb"^i!  n: type=int; val=\d+", b"i!  n: type=int; val=%d" % n, line)
            out.append(line)
        return out

    a, b = thread(111, 0xAAAA, 64, 64), thread(222, 0xBBBB, 128, 96)
    at_n = next(i for i, line in enumerate(a) if line.startswith(b"i!  n:"))
    mixed = [b[0], *b[1:at_n], a[0], *a[1:at_n], *b[at_n:], b[0], *a[at_n:], *b[1:]]
    capture = parse(b"\n".join(mixed) + b"\n")
    read = [(d.m, d.n, tuple(s.sites)) for d, s in capture.gemms.items()]
    assert all((m, n) in ((64, 64), (128, 96)) for m, n, _ in read), read  # no chimera of both
    for m, _, sites in read:  # and each under its own thread's handle
        assert all(site.handle == ("0xaaaa" if m == 64 else "0xbbbb") for site in sites)
    assert capture.logs["cublas"].interleaved >= 2


def test_a_log_cut_inside_its_last_call_says_so_and_is_not_taken_for_interleaving():
    text = log("block", "cublas")
    capture = parse(text[:text.rindex(b"i!  ldc:")])
    stats = capture.logs["cublas"]
    assert stats.interleaved == 0 and stats.malformed == 0 and stats.cut == 1
    assert any(sample.startswith("cut: the log ends inside this call") for sample in stats.samples)
    assert sum(s.calls for s in capture.gemms.values()) == 17


def test_endless_garbage_is_counted_and_the_log_after_it_still_read():
    capture = parse(b"x" * (3 << 20) + b"\n" + log("block", "cublas"), chunk=1 << 20)
    stats = capture.logs["cublas"]
    assert stats.unknown_lines + stats.malformed >= 1 and sum(s.calls for s in capture.gemms.values()) == 18


def test_catalogue_roles_need_the_same_transposes():
    from cublas_det.core.key import like
    from cublas_det.core.shapes import GemmShape

    assert like(GemmShape("s", 3352, 768, 16384, True, False)) == "mamba2-130m/in_proj/dW"
    assert like(GemmShape("s", 3352, 768, 16384, False, False)) == ""


def test_cli_capture_refusals_of_programs_and_outputs(tmp_path, capsys):
    bad = tmp_path / "bad-exe"
    bad.write_bytes(b"\x7fELF garbage")
    bad.chmod(0o755)
    assert capture_cli.main(["--out", str(tmp_path / "c.json"), "--", str(bad)]) == 2
    assert "cannot run" in unwrapped(capsys.readouterr().err)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert capture_cli.main(["--out", str(fifo), "--", "true"]) == 2
    assert "is a FIFO" in unwrapped(capsys.readouterr().err)
    if os.path.exists("/dev/full"):
        assert capture_cli.main(["--out", "/dev/full", "--", "true"]) == 2
        assert "could not write /dev/full" in unwrapped(capsys.readouterr().err)


def test_a_daemon_left_writing_to_the_log_does_not_hold_the_capture(tmp_path, monkeypatch):
    import time

    from cublas_det.apilog import run as capture_run

    monkeypatch.setattr(capture_run, "AFTER_EXIT_S", 0.3)

    program = """(while :; do echo "i! x" >&3 || exit; sleep 0.2; done) 3>"$CUBLAS_LOGDEST_DBG" & exit 0"""
    started = time.monotonic()
    status, _ = run_captured(["sh", "-c", program], Capture())
    assert status == 0 and time.monotonic() - started < capture_run.AFTER_EXIT_S + 3


def test_what_the_capture_report_reads_is_checked_before_it_renders():
    data = capture_file.to_dict(parse(log("block", "cublas")), complete=True)
    for change, says in ((lambda d: d.update(handles="x"), "bad.json: handles: expected a list of objects, found 'x'"),
                         (lambda d: d["logs"].update(cublas=5), "bad.json: logs['cublas']: expected an object, found 5"),
                         (lambda d: d["gemms"][0]["sites"][0].update(thread="t1"), "gemms[0].sites[0].thread: "),
                         (lambda d: d.update(command="python x.py"), "command: expected a list of strings")):
        bad = json.loads(json.dumps(data))
        change(bad)
        with pytest.raises(capture_file.InputFileError, match=re.escape(says)):
            capture_file.from_data(bad, "bad.json")


def test_captured_files_with_wrongly_typed_fields_are_refused_in_one_line(tmp_path):
    data = capture_file.to_dict(parse(log("block", "cublas")), complete=True)
    for field, value in (("math_mode", "0"), ("a_type", ["R_16BF"]), ("api", 5), ("transa", 1), ("m", 0)):
        bad = {**data, "gemms": [{**data["gemms"][0], field: value}]}
        with pytest.raises(capture_file.InputFileError, match=field):
            capture_file.from_data(bad, "bad.json")


@pytest.mark.gpu
def test_bench_capture_checks_and_times_the_captured_gemms_batched_ones_batched(tmp_path, capsys):
    out = tmp_path / "misc.json"
    write_json(str(out), capture_file.to_dict(parse(log("misc", "cublas"), log("misc", "cublaslt")),
                                                      complete=True))
    assert bench_cli.main(["--capture", str(out), "--quick"]) == 0
    written = capsys.readouterr()
    text = written.out
    assert "256x128x512 op NN, a batch of 8" in text and "64x32x96 op NN, a batch of 8" in text  # strided batched
    assert "not replayed: needs R_64F" in written.err  # the fp64 one, listed on stderr


def test_findings_of_every_kind_on_a_made_capture():
    """Every finding, from a capture made by hand: handles shared by streams (with a workspace per stream,
    and under CUBLAS_WORKSPACE_CONFIG) and by threads, handles of other math modes and workspaces, and
    fp32 GEMMs under TF32 and BF16X9, a reduced compute type, half precision with RPR allowed, split-K,
    a small workspace."""
    capture = Capture()
    capture.environment["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"
    fp32 = dict(transa="N", transb="N", m=64, n=64, k=64, lda=64, ldb=64, ldc=64, a_type="R_32F", b_type="R_32F",
                c_type="R_32F", compute_type="COMPUTE_32F", algo=-1)
    gemms = {
        "tf32": (GemmDefinition("cublasGemmEx", **fp32, math_mode=3 | 16), Site(1, "0xa", "0x1", 7)),
        "bf16x9": (GemmDefinition("cublasGemmEx", **fp32, math_mode=4, workspace_bytes=1 << 20), Site(1, "0xa", "0x2", 7)),
        "reduced": (GemmDefinition("cublasGemmEx", **{**fp32, "compute_type": "COMPUTE_32F_FAST_TF32"}, math_mode=16),
                    Site(1, "0xb", "0x1", 7)),
        "rpr": (GemmDefinition("cublasGemmEx", **{**fp32, "a_type": "R_16F", "b_type": "R_16F", "c_type": "R_16F"},
                               math_mode=0), Site(1, "0xb", "0x2", 8)),
        "split": (GemmDefinition("cublasLtMatmul", **{**fp32, "algo": None},
                                 lt_algo=(("numSplitsK", "4"), ("reductionScheme", "REDUCTION_SCHEME_INPLACE"))),
                  Site(None, "", "0x3", 7)),
    }
    for definition, site in gemms.values():
        capture.add_gemm(definition, site)
    capture.workspace_addresses |= {(Site(1, "0xa", "0x1", 7), "0x100"), (Site(1, "0xa", "0x2", 7), "0x200")}
    ids = {definition: f"g{n}" for n, (definition, _) in enumerate(gemms.values(), 1)}
    shared = "cuBLAS documents identical bits only with one stream per handle; "
    assert findings(capture, ids, 90) == [
        Finding("shared-handle-streams", "setup", "handle 0xa of process 1 ran GEMMs on 2 streams (0x1, 0x2): " + shared
                + "each stream had a workspace of its own (cuBLAS's documented remedy)", ("0xa",), ("0x1", "0x2")),
        Finding("shared-handle-streams", "hazard", "handle 0xb of process 1 ran GEMMs on 2 streams (0x1, 0x2): " + shared
                + "CUBLAS_WORKSPACE_CONFIG=:4096:8 was set (it sizes cuBLAS's own pool, not a user workspace); else "
                "give each stream its own handle or workspace", ("0xb",), ("0x1", "0x2")),
        Finding("shared-handle-threads", "setup", "handle 0xb of process 1 was used from 2 threads (one after another, "
                "as PyTorch's handle pool does, or at once); cuBLAS recommends a handle per thread", ("0xb",),
                ("0x1", "0x2")),
        Finding("mixed-math-modes", "setup", "handles ran GEMMs in different math modes: DEFAULT on 0xb; "
                "FP32_EMULATED_BF16X9 on 0xa; DEFAULT+DISALLOW_RPR on 0xb; TF32+DISALLOW_RPR on 0xa", ("0xa", "0xb")),
        Finding("mixed-workspaces", "setup", "handles ran GEMMs with different workspaces: cuBLAS's own on 0xa, 0xb; "
                "1 MiB on 0xa", ("0xa", "0xb")),
        Finding("tf32-math", "precision", "fp32 GEMMs ran under TF32 math: 10-bit mantissa products, not fp32's: g1",
                ("0xa",), (), ("g1",)),
        Finding("bf16x9-math", "precision", "fp32 GEMMs ran under BF16X9 math: fp32 emulated with bf16 products on "
                "tensor cores, other bits than fp32's: g2", ("0xa",), (), ("g2",)),
        Finding("reduced-compute", "precision", "GEMMs asked for a compute type below fp32's: g3 "
                "(COMPUTE_32F_FAST_TF32)", ("0xb",), (), ("g3",)),
        Finding("rpr-allowed", "precision", "half-precision GEMMs on handles that allow reduced-precision reductions "
                "(no CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION): g4", ("0xb",), (), ("g4",)),
        Finding("split-k", "hazard", "cuBLASLt chose split-K or a reduction scheme, whose split depends on the SM "
                "count and the workspace: g5 (numSplitsK=4 REDUCTION_SCHEME_INPLACE)", (), (), ("g5",)),
        Finding("small-workspace", "setup", "workspaces below cuBLAS's recommended 32 MiB: g2 (1 MiB)", ("0xa",), (),
                ("g2",))]
    assert findings(capture, ids)[-1].text.endswith("(the GPU is unknown: the pre-Hopper figure): g2 (1 MiB)")
