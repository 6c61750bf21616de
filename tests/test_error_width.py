"""Every line the CLI prints, errors and warnings included, fits 100 columns: one test drives every error
path a machine without a GPU reaches, through error_line (the one printer of errors), and reads each line."""

import sys

import pytest

from cublas_det.core import device
from cublas_det.cli import COMMANDS

WIDTH = 100
LONG = "x" * 20  # a longer value: a message grows with it (one word over 100 columns could not wrap)


def _cases(tmp):
    """The command lines, their files in ``tmp`` (the working folder) named by relative paths, as typed."""
    bad = tmp / "bad.json"
    bad.write_text("{not json")
    (tmp / "a").mkdir()
    (tmp / "a" / "step_1_x.npy").write_bytes(b"\x93NUMPY cut")
    commands = [[name, f"--no-such-{LONG}"] for name in COMMANDS]  # argparse's own error, every command
    commands += [[name] for name in COMMANDS if name not in ("env", "report", "diff", "compare")]  # no GPU
    commands += [
        ["env"], ["report", f"{LONG}/run.json"], ["report", "bad.json"], ["compare", "bad.json", "bad.json"],
        ["diff", LONG, "b"], ["diff", "a", "a"],
        ["bench", "--shape", f"12x3{LONG}"], ["bench", "--modes", f"fast{LONG}"], ["bench", "--fail-on", "5"],
        ["bench", "--json", f"/nonexistent-{LONG}/x.json"], ["bench", "--scenarios", LONG],
        ["bench", "--capture", "bad.json"], ["capture", "--from", LONG], ["explain"],
        ["prescribe", "--capture", "bad.json"], ["sweep", "--devices", LONG], ["audit", f"{LONG}.py:step"],
        ["run", "--lock", "bad.json", "--", "true"],
    ]
    return commands


@pytest.mark.parametrize("cupy", ["installed", "missing"])
def test_every_error_line_fits_100_columns(typed, tmp_path, monkeypatch, cupy):
    if cupy == "missing":  # as where CuPy is not installed: importing it fails
        for name in ("cupy", "cupy_backends"):
            monkeypatch.setitem(sys.modules, name, None)
        monkeypatch.setattr(device, "_cached_reason", device.gpu_unavailable_reason)  # asked again, not cached
    monkeypatch.chdir(tmp_path)
    wide = []
    for words in _cases(tmp_path):
        result = typed(f"cublas-det {words[0]}", *words[1:])
        raw = result.printed_stderr
        assert "Traceback" not in raw, (words, raw)
        wide += [(words, line) for line in (result.stdout + raw).splitlines() if len(line) > WIDTH]
    assert not wide, wide
