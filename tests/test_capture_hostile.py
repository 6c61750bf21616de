"""Capture against hostile logs and files: each case made in the test from the real logs of
tests/data/capture (cut, CRLF, wrong types, out-of-bounds values, limits), no GPU needed."""

import gzip
import json
import re

import pytest

from cublas_det.capture import file as capture_file
from cublas_det.cli import capture as capture_cli

from .test_capture import DATA, log, parse, stored


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
    return code, written.out, written.err, data


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
