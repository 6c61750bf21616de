"""One wrapper and one width: every report wraps with ``words.wrapped``, ``words.report_width()`` columns
wide (the capture report once kept 100 columns on a wider terminal)."""

import pathlib

from cublas_det.render.capture import render_capture
from cublas_det.base.words import WIDTH

from .test_capture import log, parse, stored

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "cublas_det"


def test_only_words_wraps_text():
    assert [path.relative_to(PACKAGE).as_posix() for path in PACKAGE.rglob("*.py")
            if "import textwrap" in path.read_text()] == ["base/words.py"]


def test_the_capture_report_is_as_wide_as_every_report(monkeypatch):
    found = stored(parse(log("block", "cublas"), log("block", "cublaslt")))
    monkeypatch.delenv("COLUMNS", raising=False)
    narrow = render_capture(found, "c.json").splitlines()
    monkeypatch.setenv("COLUMNS", "160")
    wide = render_capture(found, "c.json").splitlines()
    assert max(map(len, narrow)) <= WIDTH < max(map(len, wide)) <= 160
    assert render_capture(found, "c.json", width=WIDTH).splitlines() == narrow
