"""The shared words: counts, shares, wrapping."""

from cublas_det.words import percent, plural, wrapped


def test_plural_counts_in_words():
    assert [plural(n, "leaf") for n in (0, 1, 2)] == ["0 leaves", "1 leaf", "2 leaves"]
    assert [plural(n, "step") for n in (1, 3)] == ["1 step", "3 steps"]


def test_a_share_is_never_rounded_to_none_or_to_all():
    assert [percent(1, 4096), percent(0, 4096), percent(4095, 4096), percent(4096, 4096), percent(1, 4)] == \
        ["<0.1%", "0.0%", ">99.9%", "100.0%", "25.0%"]
    assert percent(0, 0) == "0.0%"


def test_wrapped_keeps_every_line_within_the_width():
    lines = wrapped("word " * 50, 40)
    assert len(lines) > 1 and max(map(len, lines)) <= 40 and lines[1].startswith("  ")
